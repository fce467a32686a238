/*
 * proto/guestctl.h: the host<->guest control channel, included by both
 * ends (ksb-run on the host; the guest's PID 1, guest/init.c and the files
 * of guest/guest.h).
 *
 * Guest control channel (virtio-serial port "org.ksb.control", a socketpair
 * end passed to QEMU as -chardev socket,fd=N).  Line-based, ASCII, every
 * line ends in '\n'.
 *
 *   host -> guest, right after QEMU starts (optional lines first):
 *     TERM <value>\n        value [A-Za-z0-9._+-]{1,64}: the guest's $TERM
 *     WINSZ <rows> <cols>\n 1..9999 each: the console window size
 *     RAW\n                 host stdout is not a terminal: the guest turns
 *                           off echo and output processing on its console
 *     ARGV <len>\n<bytes>   len 2..GUESTCTL_ARGV_MAX decimal; bytes are the
 *                           command's arguments, each terminated by NUL
 *                           (so the last byte is NUL); 1..GUESTCTL_ARGC_MAX
 *                           arguments, argv[0] non-empty.  Ends the header.
 *     BYE\n                 acknowledges EXIT (the guest then powers off)
 *     STOP\n                after ARGV: stop gracefully (the command's
 *                           process group gets SIGTERM, SIGKILL after
 *                           GUESTCTL_STOP_GRACE_MS, then EXIT as usual).
 *                           The ACPI power button (QMP system_powerdown)
 *                           does the same.
 *     SELFTEST\n            after READY (the gateway reloaded its policy):
 *                           run the enforcement self-test again while the
 *                           command runs and answer with one SELFTEST line
 *                           below; on a failure init kills every process
 *                           at once.  In agent mode between frames.
 *     SECRET <name> <value>\n  after READY (a gateway reload gave the
 *                           profile a credential, or a new placeholder):
 *                           /run/ksb/secrets/<name> := value (name as a
 *                           secret's, value 1.. bytes without space), by
 *                           rename, 0400, the agent's
 *     UNSECRET <name>\n     after READY: that file goes (a credential
 *                           left the profile)
 *     CA <line>\n ... CA-END\n  after READY: a PEM certificate line by
 *                           line (the gateway CA, for a guest that had no
 *                           credential at boot), added to the CA bundle by
 *                           rename unless it holds it already
 *                           (GUESTCTL_CA_MAX bytes at most).  These come
 *                           between agent frames too
 *   guest -> host:
 *     STAGE <ms> <name>\n   before READY, one per start-up stage: the
 *                           guest's CLOCK_BOOTTIME in ms (<= 86400000)
 *                           when the stage ended; name 1..GUESTCTL_STAGE_NAME
 *                           bytes of [a-z0-9 -] ("started", "modules
 *                           loaded", ...): informational only, for the
 *                           start-time breakdown of ksb-run -v
 *     READY\n               init is about to exec the command
 *     STOPPING\n            a graceful stop (STOP or power button) began
 *     ERR <text>\n          a setup failure, text is informational only
 *     SELFTEST ok <n> <ms>\n  the enforcement self-test (guest/selftest.c):
 *                           n probes (1..64), every one failed as it
 *                           must, in ms milliseconds (0..600000)
 *     SELFTEST fail <name>\n a probe got through ([a-z0-9-]{1,32}); init
 *                           then refuses to start the command (ERR, EXIT
 *                           125).  Not sent with ksb.selftest=off.  Sent
 *                           once before READY, and after READY only as the
 *                           answer to the host's SELFTEST: the host counts
 *                           the first answer to a request it made and
 *                           ignores (and logs) any other.
 *     EXIT <status>\n       0..255: the command's exit status (128+sig if
 *                           killed by a signal; 125 init failed, 126 cannot
 *                           exec, 127 command not found)
 *
 * A guest from a template (ksb-run template=on, vmrunner/template.c) has
 * ksb.template=1 alone on its kernel command line.  It says, once, before
 * any share is mounted or address set:
 *     TEMPLATE-READY\n      the host may save it now (QEMU migration)
 * and waits; the host of each restored instance sends first:
 *     INSTANCE <len>\n<bytes>  len 1..GUESTCTL_INSTANCE_MAX: the ksb.*
 *                           keys the kernel command line would carry
 *                           (ksb.id= ... ksb.share=, space-separated, no
 *                           NUL), and ksb.mac=xx:xx:xx:xx:xx:xx (eth0's
 *                           address), ksb.time=SEC.NSEC (the host's
 *                           CLOCK_REALTIME) and ksb.seed=HEX
 *                           (GUESTCTL_SEED_BYTES random bytes, hex: the
 *                           guest's RNG is reseeded with them), each once,
 *                           and ksb.fwcfg=1 if QEMU has fw_cfg files
 *                           (secrets, preset files, CAs) for it
 *   then the header above as usual.
 *
 * The guest is hostile: the host caps each line at GUESTCTL_LINE_MAX and
 * what the guest sends at a byte budget per second (vmrunner/supervise.c,
 * sup_guest_budget; never a total, so that the EXIT line after any
 * amount of garbage is read), parses strictly, and only logs (escaped)
 * what it does not understand.
 */
#ifndef KSB_PROTO_GUESTCTL_H
#define KSB_PROTO_GUESTCTL_H

#include <stddef.h>
#include <stdint.h>

/* ---- guestctl.c ------------------------------------------------------------
 * Encoders and parsers of the guest control channel above.  No I/O, no
 * globals, plain malloc (also linked into the static guest init).
 */
#define GUESTCTL_PORT_NAME     "org.ksb.control"
#define GUESTCTL_ARGV_MAX      65536 /* bytes of the NUL-separated argv */
#define GUESTCTL_ARGC_MAX      4096
#define GUESTCTL_LINE_MAX      256 /* bytes of one line, '\n' included */
#define GUESTCTL_STOP_GRACE_MS 5000
#define GUESTCTL_STAGE_NAME    40 /* bytes of a STAGE line's name */
/*
 * The initramfs's /modules.list: one absolute path a line, in load order;
 * the modules after this line only for a guest with ksb.disk=1.
 */
#define GUESTCTL_MODULES_DISK  "#disk"

#define GUESTCTL_STAGE_MAX_MS	86400000
#define GUESTCTL_TEMPLATE_READY "TEMPLATE-READY"
#define GUESTCTL_INSTANCE_MAX	4096 /* bytes of INSTANCE's keys */
#define GUESTCTL_SEED_BYTES	32   /* ksb.seed: 256 bits */
/*
 * The name the self-test CONNECTs to (guest/selftest.c): no profile may
 * allow it (RFC 6761 reserves .invalid).  The gateway never holds it for
 * approval and ksbctl policy suggest never proposes it.
 */
#define GUESTCTL_SELFTEST_NAME	"ksb-selftest.invalid"
/*
 * The gateway's ports the self-test probes (tcp-gateway: TCP
 * GUESTCTL_SELFTEST_PORT, or the next one when that is the proxy's;
 * dns-gateway: UDP GUESTCTL_SELFTEST_DNS).  The gateway holds canary
 * listeners there (gateway/parent/canary.c): without its rules a probe
 * is answered, not refused.
 */
#define GUESTCTL_SELFTEST_PORT	22
#define GUESTCTL_SELFTEST_DNS	53

/*
 * Secrets travel host -> guest as one fw_cfg file, GUESTCTL_SECRETS_FWCFG,
 * whose content is a sequence of records "<name> <len>\n<len bytes>";
 * name [A-Za-z0-9_.-]{1,64} not starting with '.', len decimal
 * <= GUESTCTL_SECRET_MAX, at most GUESTCTL_SECRETS_MAX records.
 */
#define GUESTCTL_SECRETS_FWCFG	 "opt/org.ksb/secrets"
/* Extra CA certificates (PEM) for the guest's bundle (vmrunner etc_extra_ca). */
#define GUESTCTL_CA_FWCFG	 "opt/org.ksb/ca"
#define GUESTCTL_CA_MAX		 (1024 * 1024)
#define GUESTCTL_SECRET_MAX	 65536
#define GUESTCTL_SECRETS_MAX	 32
#define GUESTCTL_SECRET_NAME_MAX 64

/*
 * The agent preset's files (vmrunner/preset.c) travel like the secrets,
 * as fw_cfg GUESTCTL_HOME_FWCFG: records "<path> <mode> <len>\n<len
 * bytes>"; path relative to the agent's home (guestctl_home_path_problem),
 * mode 4 octal digits (0000..0777), len decimal <= GUESTCTL_HOME_FILE_MAX,
 * at most GUESTCTL_HOME_FILES records.  The guest writes them as the agent
 * user before the agent starts, every boot, each replacing the old file.
 */
#define GUESTCTL_HOME_FWCFG    "opt/org.ksb/home"
#define GUESTCTL_HOME_FILE_MAX 65536
#define GUESTCTL_HOME_FILES    16
#define GUESTCTL_HOME_PATH_MAX 128

/*
 * guestctl_home_path_problem: NULL if p may be a preset file's path:
 * relative, 1..GUESTCTL_HOME_PATH_MAX bytes of [A-Za-z0-9._/-], no empty,
 * "." or ".." component, and under .claude/, .codex/ or .config/, or
 * exactly .claude.json.  Else why not, a static string.
 */
const char *guestctl_home_path_problem(const char *p);
/*
 * guestctl_home_next: parse the record at buf[*off..len), as
 * guestctl_secret_next: path (GUESTCTL_HOME_PATH_MAX + 1 bytes), *mode,
 * *val, *vallen (into buf).  1, 0 at the end, -1 malformed (*err).
 */
int guestctl_home_next(const char *buf, size_t len, size_t *off, char *path,
    unsigned *mode, const char **val, size_t *vallen, const char **err);

/* guestctl_valid_secret_name: 1 if name is a valid secret name, else 0. */
int guestctl_valid_secret_name(const char *name);

/*
 * guestctl_secret_next: parse the record at buf[*off..len).  On success
 * name (NUL-terminated, GUESTCTL_SECRET_NAME_MAX + 1 bytes), *val, *vallen
 * (pointing into buf) are set and *off advances: 1.  0 at the end, -1 if
 * malformed (*err).
 */
int guestctl_secret_next(const char *buf, size_t len, size_t *off, char *name,
    const char **val, size_t *vallen, const char **err);

/*
 * guestctl_encode: build the host -> guest header for argv (argc >= 1),
 * term (NULL or "": none), rows/cols (0: none), raw.  *out (malloc'd,
 * caller frees) and *outlen receive the bytes.  0, or -1 with a static
 * message in *err (argument too long, bad TERM value...).
 */
int guestctl_encode(char *const *argv, const char *term, int rows, int cols,
    int raw, char **out, size_t *outlen, const char **err);

/*
 * guestctl_parse_argv: split the ARGV payload buf[0..len) into a
 * NULL-terminated vector of pointers into buf (*argvp malloc'd, caller
 * frees the vector only).  0, or -1 with *err.
 */
int guestctl_parse_argv(char *buf, size_t len, char ***argvp, const char **err);

/*
 * guestctl_parse_uint: strict decimal (no sign, no leading zero unless "0",
 * no spaces) of s[0..len) into *v, which must be <= max.  0 or -1.
 */
int guestctl_parse_uint(
    const char *s, size_t len, unsigned long max, unsigned long *v);

/*
 * guestctl_guest_path_problem: NULL if p may be a share's mount point in
 * the guest (ksb.share=TAG:PATH on the kernel command line): absolute, 2 to
 * 255 bytes, [A-Za-z0-9._/+@-], no "." or ".." component, no "//", no
 * trailing "/", not one of the guest's own mount points (/usr, /proc, /sys,
 * /dev and below, /etc, /home/agent, /tmp, /run, /run/ksb and below).
 * Else why not, a static string.  The host checks it before QEMU starts,
 * the guest's init again before it mounts.
 */
const char *guestctl_guest_path_problem(const char *p);

enum guestctl_msg {
	GUESTCTL_BAD = -1, /* not understood */
	GUESTCTL_READY,
	GUESTCTL_EXIT,	   /* *status = 0..255 */
	GUESTCTL_ERR,	   /* *text, *textlen: the rest of the line */
	GUESTCTL_STOPPING, /* "STOPPING": a graceful stop has begun */
	/* agent mode frames (guestctl_frame_parse) */
	GUESTCTL_HELLO,	  /* version matches; n: last turn / report seq */
	GUESTCTL_VERSION, /* HELLO with another version (f->version) */
	GUESTCTL_PROMPT,  /* n: turn, text */
	GUESTCTL_ACK,	  /* n: turn delivered (or already delivered) */
	GUESTCTL_REPORT,  /* n: seq, turn, state, text */
	GUESTCTL_ACKR,	  /* n: report seq received */
	GUESTCTL_OUT,	  /* text: raw pane output */
	GUESTCTL_PING,	  /* n: sequence number */
	GUESTCTL_PONG,
	GUESTCTL_TOUT,	   /* turn, n: fd (1, 2), text */
	GUESTCTL_SCREEN,   /* n: id; text (none: the host's request) */
	GUESTCTL_SCREND,   /* n: id, status: GUESTCTL_SCREEN_* */
	GUESTCTL_STAGE,	   /* *status: ms; *text, *textlen: the name */
	GUESTCTL_SELFTEST, /* *status: n probes passed, or -1: failed,
			      *text: the probe's name */
};
/*
 * guestctl_parse_guest: one guest line line[0..len), '\n' excluded.
 * SELFTEST ok: *status = n, *text, *textlen the ms digits (into line);
 * SELFTEST fail: *status = -1,
 * *text, *textlen the name (into line).
 */
enum guestctl_msg guestctl_parse_guest(const char *line, size_t len,
    int *status, const char **text, size_t *textlen);

/*
 * Agent mode (ksb-run --agent): the host header carries "AGENT <idle-s>\n"
 * before ARGV (idle-s 1..86400), optionally followed by (also before ARGV):
 *   MODE headless          each turn is one process: the agent user runs
 *                          GUESTCTL_TURN_SCRIPT (a preset file, in the
 *                          agent's home) with the turn's text as $1, in
 *                          ~/work, stdin /dev/null; stdout and stderr go
 *                          to the host as TOUT; its exit ends the turn
 *                          (REPORT done if 0, else failed, text "exit N").
 *                          The tmux session then holds a shell.
 *   HOOKS <submit> <end>   0|1 each: the agent reports its prompt submit
 *                          (ksb-report working) / its turn's end (done);
 *                          end 1: no "pane quiet" idle.
 *   PANE <ready> <busy>    interactive: a turn is pasted once the pane
 *                          (tmux capture-pane -p) holds one of the
 *                          '|'-separated ready strings and none of the
 *                          busy ones (ready "-": once the pane is not
 *                          blank and printed nothing for 1.5 s, 10 s at
 *                          most); each field percent-encoded, "-" for
 *                          none.  Without it: pasted at once, as before.
 * ARGV is then the agent's command, run
 * as the agent user in the tmux session "agent" (socket
 * GUESTCTL_TMUX_SOCKET).  After READY both sides speak frames, one per
 * line; text fields are percent-encoded (every byte outside 0x21..0x7e,
 * and '%', as %XX uppercase), so a frame never holds a space, control
 * byte or newline inside a field:
 *
 *   both:          HELLO <version> <n>    version GUESTCTL_AGENT_VERSION;
 *                                         guest: n = last turn delivered,
 *                                         host: n = last report seq seen
 *                  PING <n> / PONG <n>    every GUESTCTL_HEARTBEAT_MS;
 *                                         peer lost after
 *                                         GUESTCTL_PEER_LOST_MS of silence
 *   host -> guest: PROMPT <turn> <text>   text <= GUESTCTL_TEXT_MAX bytes;
 *                                         turns increase; a turn <= the
 *                                         last delivered one is only ACKed
 *                                         again, never typed twice
 *                  ACKR <seq>             report seq received
 *   guest -> host: ACK <turn>
 *                  REPORT <seq> <turn> <state> <text>   text <=
 *                                         GUESTCTL_REPORT_MAX; resent until
 *                                         ACKR; the host drops seq <= seen
 *                  OUT <bytes>            pane output, <= GUESTCTL_OUT_CHUNK
 *                  TOUT <turn> <fd> <bytes>   headless: the turn process's
 *                                         stdout (fd 1) or stderr (2),
 *                                         <= GUESTCTL_OUT_CHUNK; dropped
 *                                         like OUT when the queue is full
 *   host -> guest: SCREEN <id>            id 1..2^32-1: the pane as it is
 *                                         now (tmux capture-pane -p -t
 *                                         agent, as the agent user, killed
 *                                         after GUESTCTL_SCREEN_MS), at
 *                                         most GUESTCTL_SCREEN_MAX bytes
 *   guest -> host: SCREEN <id> <bytes>    one piece of that capture, in
 *                                         order, <= GUESTCTL_OUT_CHUNK
 *                  SCREND <id> <status>   the last frame of the answer:
 *                                         GUESTCTL_SCREEN_OK (complete),
 *                                         _CUT (truncated), _FAILED
 *                                         (capture-pane failed, timed out)
 *
 * Caps per line: GUESTCTL_FRAME_MAX host -> guest, GUESTCTL_GUEST_FRAME_MAX
 * guest -> host; a longer line is dropped whole.  Neither side blocks on
 * the other: both write through bounded queues and drop pane output
 * first.
 */
#define GUESTCTL_AGENT_VERSION	 1
#define GUESTCTL_TEXT_MAX	 65536
#define GUESTCTL_REPORT_MAX	 1024
#define GUESTCTL_OUT_CHUNK	 1024
#define GUESTCTL_FRAME_MAX	 (3 * GUESTCTL_TEXT_MAX + 64)
#define GUESTCTL_GUEST_FRAME_MAX (3 * GUESTCTL_REPORT_MAX + 64)
#define GUESTCTL_HEARTBEAT_MS	 5000
#define GUESTCTL_PEER_LOST_MS	 15000
#define GUESTCTL_TMUX_SOCKET	 "/run/ksb/agent/tmux/sock"
#define GUESTCTL_REPORT_SOCKET	 "/run/ksb/agent/report.sock"
#define GUESTCTL_TURN_SCRIPT	 ".config/ksb/turn" /* in the agent's home */
#define GUESTCTL_PANE_MAX	 96    /* bytes of PANE's patterns, decoded */
#define GUESTCTL_SCREEN_MAX	 65536 /* bytes of a SCREEN answer, decoded */
#define GUESTCTL_SCREEN_MS	 5000  /* capture-pane killed after this */
enum { GUESTCTL_SCREEN_OK, GUESTCTL_SCREEN_CUT, GUESTCTL_SCREEN_FAILED };

/*
 * The agent lines of the host's header, before ARGV: "AGENT <idle-s>",
 * then "MODE headless" (absent: interactive), "HOOKS <submit> <end>" (0 or
 * 1 each: the agent's hooks report working / done) and "PANE <ready>
 * <busy>" (each percent-encoded, at most GUESTCTL_PANE_MAX bytes decoded,
 * "-" for none; absent: no pane patterns).
 */
struct guestctl_agent_hdr {
	unsigned long idle_s; /* 1..86400 */
	int headless;
	int hook_submit, hook_end;
	const char *pane_ready, *pane_busy; /* NULL: no PANE line */
};
/*
 * guestctl_encode_agent: those lines into *out (malloc'd, caller frees).
 * Their length, or -1 (out of memory, idle_s out of range, a pattern too
 * long).
 */
int guestctl_encode_agent(const struct guestctl_agent_hdr *h, char **out);

/* What the guest made of the header lines so far (guestctl_parse_header). */
struct guestctl_header {
	char term[65]; /* "" if none */
	int rows, cols, raw;
	int agent;	      /* an AGENT line came */
	unsigned long idle_s; /* its value */
	int headless, hook_submit, hook_end;
	int pane; /* a PANE line came: */
	char pane_ready[GUESTCTL_PANE_MAX + 1],
	    pane_busy[GUESTCTL_PANE_MAX + 1];
};
enum { GUESTCTL_HDR_BAD = -1, GUESTCTL_HDR_FIELD, GUESTCTL_HDR_ARGV };
/*
 * guestctl_parse_header: one header line (NUL-terminated, '\n' removed)
 * into h: GUESTCTL_HDR_FIELD, GUESTCTL_HDR_ARGV (*argv_len: the payload's
 * length, which follows), or GUESTCTL_HDR_BAD (not understood).  h starts
 * zeroed.
 */
int guestctl_parse_header(
    const char *line, struct guestctl_header *h, unsigned long *argv_len);

/* Agent states (REPORT, ksbctl status). */
enum {
	GUESTCTL_ST_STARTING,
	GUESTCTL_ST_WORKING,
	GUESTCTL_ST_DONE,
	GUESTCTL_ST_BLOCKED,
	GUESTCTL_ST_INFO,
	GUESTCTL_ST_IDLE,
	GUESTCTL_ST_EXITED,
	GUESTCTL_ST_FAILED, /* headless: the turn's process exited non-zero */
};
const char *guestctl_state_name(int st);
/* guestctl_state_parse: s[0..len) to a GUESTCTL_ST_*, or -1. */
int guestctl_state_parse(const char *s, size_t len);

struct guestctl_frame {
	enum guestctl_msg type;
	unsigned version; /* HELLO, VERSION */
	uint64_t n;	  /* see the frames above */
	uint64_t turn;	  /* REPORT */
	int state;	  /* REPORT: GUESTCTL_ST_* */
	int status;	  /* SCREND: GUESTCTL_SCREEN_* */
	char *text;	  /* decoded into the caller's buffer, not NUL-ended */
	size_t textlen;
};

/*
 * guestctl_frame_parse: one agent frame line[0..len) ('\n' excluded) into
 * *f; text is decoded into text[0..textcap).  0, or -1 if malformed
 * (f->type GUESTCTL_BAD).  A HELLO of another version parses as
 * GUESTCTL_VERSION.
 */
int guestctl_frame_parse(const char *line, size_t len, struct guestctl_frame *f,
    char *text, size_t textcap);
/*
 * guestctl_encode_text: percent-encode text[0..len) into out (cap bytes,
 * NUL-terminated; 3 * len + 1 always suffices).  Returns the length; stops
 * early (whole escapes only) if cap is short.
 */
size_t guestctl_encode_text(
    char *out, size_t cap, const char *text, size_t len);
/*
 * guestctl_screen_piece: the frame "SCREEN <id> <encoded text>\n" for
 * text[0..len) (len <= GUESTCTL_OUT_CHUNK, id 1..2^32-1) into out (cap >=
 * GUESTCTL_GUEST_FRAME_MAX always suffices).  Its length, 0 if it does
 * not fit or id or len is out of range.
 */
size_t guestctl_screen_piece(
    char *out, size_t cap, uint64_t id, const char *text, size_t len);
/* guestctl_decode_text: the inverse; 0, or -1 on a bad escape or byte. */
int guestctl_decode_text(
    const char *in, size_t len, char *out, size_t cap, size_t *outlen);

/*
 * A line splitter over a caller's buffer of cap bytes: partial lines are
 * kept across feeds, a line longer than cap is dropped whole (dropped
 * counts them), every complete line goes to cb without its '\n'.
 */
struct guestctl_lines {
	char *buf;
	size_t len, cap;
	int skipping;
	unsigned long dropped;
};
void guestctl_lines_init(struct guestctl_lines *lb, char *buf, size_t cap);
/* guestctl_lines_feed: returns the number of lines passed to cb. */
size_t guestctl_lines_feed(struct guestctl_lines *lb, const char *data,
    size_t n, void (*cb)(void *, const char *, size_t), void *arg);

#endif
