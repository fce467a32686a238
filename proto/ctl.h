/*
 * proto/ctl.h: the control protocol of ksb-gatewayd's control socket,
 * included by the server (gateway/parent/control.c) and by every client
 * (ksb-run, ksbctl).
 */
#ifndef KSB_PROTO_CTL_H
#define KSB_PROTO_CTL_H

#include <stddef.h>
#include <stdint.h>

/* ---- ctl.c -----------------------------------------------------------------
 * Client of ksb-gatewayd's control socket (AF_UNIX stream).  Lines of at
 * most CTL_LINE_MAX bytes ('\n' included):
 *   REGISTER <id> <profile>  ->  OK tap=T ip=A/P mac=M gw=A port=N
 *                                [cred=NAME/SECRET/PLACEHOLDER ...]
 *                                (the tap fd attached, SCM_RIGHTS) | ERR text
 *   RESUME <id> <tap>        ->  OK tap=T ip=A/P mac=M gw=A port=N (no fd)
 *                                | ERR text: after a gateway restart, the
 *                                ksb-run that registered (same pid) takes
 *                                the lease back on a new connection; the
 *                                OK is followed by RELOADED <n> (below)
 *   UNREGISTER <id>          ->  OK | ERR text
 *   LIST                     ->  INSTANCE id= profile= ip= mac= tap= since=
 *                                [tunnels= up= down= at=] lines, then
 *                                END; the traffic (decimal; to root and
 *                                the control group only): tunnels open
 *                                now, bytes relayed guest->upstream (up)
 *                                and back (down) by all the instance's
 *                                tunnels since it registered, open ones
 *                                included, as counted at `at' (unix ms;
 *                                every ~0.5 s while a tunnel is open, so
 *                                a rate is (up2 - up1) / (at2 - at1));
 *                                the audit has a tunnel's bytes only once
 *                                it closed, and from then on these count
 *                                its close record's bytes: with no tunnel
 *                                open they are the audit's totals
 *   RELOAD                   ->  OK digest=D revoked=N lost=L ms=T, a
 *                                "W <note>" line per note, END | ERR <n>
 *                                errors, policy unchanged, an "E <error>"
 *                                line each (CTL_RELOAD_ERRORS_MAX at most,
 *                                then "E ... and <n> more ..."), END
 *   REQUESTS                 ->  REQUEST instance= host= port= turn= since=
 *                                left= held= lines (CONNECTs held for a
 *                                decision: `limit hold'), then END
 *   ALLOW <id> <host[:port]> <scope>  ->  OK text | ERR text: scope once,
 *                                instance (until it stops), a duration, or
 *                                turn:N (while the agent's turn N runs)
 *   DENY <id> <host[:port]>  ->  OK text | ERR text (held ones refused)
 *   TURN <id> <n>            ->  OK | ERR text: agent mode, on the lease's
 *                                connection: turn n (1..CTL_TURN_MAX) of
 *                                the instance's agent runs from now on;
 *                                the audit rows written meanwhile record it
 *   SELFTEST <id> <trigger> <n> <result> <probes> <ms> <failed>
 *                            ->  OK | ERR text: on the lease's connection,
 *                                the enforcement self-test's result
 *                                (struct ctl_selftest below), one chained
 *                                audit record (table selftests)
 * and, unsolicited, from the gateway to every lease holder:
 *   RELOADED <n>             the policy was reloaded (n 1..CTL_TURN_MAX,
 *                                per gateway run), or this connection
 *                                has just RESUMEd the lease (right after
 *                                its OK line: the policy may have changed
 *                                across the restart, or by a reload
 *                                while the lease waited for the RESUME;
 *                                n is a new number): the instance's
 *                                guest runs the self-test again and
 *                                ksb-run answers SELFTEST <id> reload <n>
 *   CREDS [cred=NAME/SECRET/PLACEHOLDER ...]
 *                            a reload changed the instance's credentials
 *                                (before its RELOADED): all of them now,
 *                                as REGISTER's OK line gives them (none:
 *                                "CREDS" alone); ksb-run has its guest
 *                                install the new placeholders (and the
 *                                gateway CA), remove the lost ones
 * A request that is refused before it runs ("ERR permission denied: ...",
 * "ERR too many connections ...") gets that one line, without END.
 * A registration is a lease held by the connection that made it.
 * The server (gateway/parent/control.c) uses these sizes too.
 */
#define CTL_LINE_MAX	      4096
#define CTL_TIMEOUT_MS	      10000 /* per reply */
#define CTL_LIST_MAX	      65536 /* instances accepted in one LIST reply */
#define CTL_RELOAD_ERRORS_MAX 200   /* E lines in one RELOAD reply */
#define CTL_RELOAD_REPLY_MAX  (4 << 20)	  /* RELOAD reply bytes accepted */
#define CTL_TURN_MAX	      (1LL << 53) /* largest turn number */

/*
 * A credential of the instance's profile (ksb-policy(5), CREDENTIALS):
 * REGISTER's and RESUME's OK line carries " cred=NAME/SECRET/PLACEHOLDER"
 * per credential (NAME: the policy's, SECRET: the guest-side name as
 * for --secret, PLACEHOLDER: what the guest gets instead of the value).
 */
#define CTL_LEASE_CREDS_MAX 8
#define CTL_PLACEHOLDER_MAX 80 /* bytes with the NUL */
struct ctl_cred {
	char name[65];
	char secret[65];
	char placeholder[CTL_PLACEHOLDER_MAX];
};

struct ctl_lease {
	char tap[16];
	uint32_t addr; /* network order */
	int prefix;
	uint8_t mac[6];
	char mac_str[18]; /* as xx:xx:xx:xx:xx:xx, lowercase */
	uint32_t gw;	  /* network order */
	uint16_t port;	  /* host order */
	struct ctl_cred creds[CTL_LEASE_CREDS_MAX];
	size_t ncreds;
};

struct ctl_instance {
	char id[33];
	char profile[65];
	uint32_t addr; /* network order */
	int prefix;    /* 32 when the reply gave none */
	char mac_str[18];
	char tap[16];
	int64_t since_ms; /* unix milliseconds */
	/* The traffic (LIST above); -1 each when the gateway sent none. */
	int64_t tunnels;
	int64_t up, down; /* bytes since the registration */
	int64_t at_ms;	  /* when counted, unix ms */
};

/* ctl_connect: connect to path (CLOEXEC).  fd, or -1 and *cause. */
int ctl_connect(const char *path, char **cause);
/*
 * ctl_register: REGISTER on fd; on success *lease is filled and *tap_fd
 * receives the tap (O_CLOEXEC).  0 or -1 and *cause (an ERR reply is
 * quoted, escaped).
 */
int ctl_register(int fd, const char *id, const char *profile,
    struct ctl_lease *lease, int *tap_fd, char **cause);
/*
 * ctl_resume: connect to path and RESUME id with the lease REGISTER gave
 * (ksb-gatewayd restarted: the guest keeps its tap, address and MAC).
 * Returns the new connection, which holds the lease from now on, or -1
 * and *cause (not ready yet, or the lease is gone: the gateway forgets
 * instances not resumed within 10 s of its start).  Call it when the
 * gateway connection closes, every ~200 ms while QEMU runs.  The
 * gateway follows its OK with RELOADED <n> (the resumed lease's
 * self-test): *reloaded is that n when it came with the reply (read
 * here), else 0 (then it comes later on the connection).  *now (if not
 * NULL) is the lease the gateway replied with: the same address, tap and
 * MAC, and the credentials of the profile in force now (the policy may
 * have changed across the restart).
 */
int ctl_resume(const char *path, const char *id, const struct ctl_lease *lease,
    struct ctl_lease *now, uint64_t *reloaded, char **cause);
/*
 * ctl_turn_line: the TURN request for turn of id into buf (size >=
 * CTL_LINE_MAX), for a non-blocking send on the lease's connection (its
 * "OK" answer is read with the connection's other traffic).  Returns
 * the length, or -1 for a bad id or turn.
 */
int ctl_turn_line(char *buf, size_t size, const char *id, uint64_t turn);
/*
 * The lease's connection after REGISTER's (or RESUME's) reply, read by
 * the lease holder (ksb-run's supervisor polls it): struct ctl_reader
 * keeps the start of a line that a read cut until the rest comes, so
 * every line is taken whole whatever the reads' sizes.  One thread.
 * ctl_reader_new: a reader of fd (not owned: never closed here).
 * ctl_reader_free: NULL-safe; closes a descriptor that came with bytes.
 */
struct ctl_reader;
struct ctl_reader *ctl_reader_new(int fd);
void ctl_reader_free(struct ctl_reader *r);
/*
 * ctl_reader_recv: one read without waiting.  The bytes read (> 0), 0
 * when there were none (EAGAIN, EINTR; or the buffer holds whole lines:
 * take them first), or -1 and *cause (the gateway closed the connection,
 * a socket error).
 */
int ctl_reader_recv(struct ctl_reader *r, char **cause);
/*
 * ctl_reader_line: the next whole line read so far into line
 * (CTL_LINE_MAX bytes: without its '\n', NUL-terminated).  1; 0 when no
 * whole line is buffered; -1 and *cause when the line is over
 * CTL_LINE_MAX bytes or holds a NUL byte or ends in CRLF: it is dropped
 * through its '\n' (what follows is read as usual).
 */
int ctl_reader_line(struct ctl_reader *r, char *line, char **cause);
/*
 * What a line from the gateway on a lease's connection is (the protocol
 * above): the answer to the oldest request still unanswered (OK or ERR:
 * requests are answered in order, once each; FORWARD only when refused,
 * with its own prefix), a RELOADED notice (*reloaded: its n), a CREDS
 * notice (parse it with ctl_parse_creds), a FORWARD
 * refusal ("ERR forward: ..."), or nothing the protocol has.
 */
enum ctl_in {
	CTL_IN_OK,
	CTL_IN_ERR,
	CTL_IN_RELOADED,
	CTL_IN_CREDS,
	CTL_IN_FORWARD_ERR,
	CTL_IN_OTHER
};
enum ctl_in ctl_classify(const char *line, uint64_t *reloaded);
/*
 * ctl_unregister: UNREGISTER id on r's connection and wait for its
 * answer (CTL_TIMEOUT_MS): the answers of the awaited requests sent
 * before it (TURN, SELFTEST) come first and are skipped (a refusal
 * among them logged), and so are notices (RELOADED, CREDS, FORWARD refusals,
 * CTL_NOTICES_MAX at most).  0 on its OK, or -1 and *cause.
 */
#define CTL_NOTICES_MAX 64
int ctl_unregister(
    struct ctl_reader *r, const char *id, size_t awaited, char **cause);
/*
 * ctl_list: connect to path, LIST, parse every INSTANCE line.  *list
 * (malloc'd, caller frees) and *n receive them.  0 or -1 and *cause.
 */
int ctl_list(
    const char *path, struct ctl_instance **list, size_t *n, char **cause);
/*
 * ctl_reload: connect to path, RELOAD, read the reply up to its END line
 * (or a one-line refusal, or whole lines before the gateway closed).
 * *reply (malloc'd, caller frees) receives the reply's lines, each ending
 * in '\n', as the gateway sent them (not escaped).  0, or -1 and *cause
 * (no answer within CTL_TIMEOUT_MS of a read, a reply over
 * CTL_RELOAD_REPLY_MAX bytes, a connection error).
 */
int ctl_reload(const char *path, char **reply, char **cause);

/*
 * ctl_call: connect to path, send line (one request, '\n'-terminated),
 * read the reply up to END, or its one line "OK ..." or "ERR ...", into
 * *reply (malloc'd; lines as sent).  0, or -1 and *cause.
 */
int ctl_call(const char *path, const char *line, char **reply, char **cause);

/* Parsers (no I/O) for the replies above; line without its '\n'. */
int ctl_parse_lease(const char *line, struct ctl_lease *lease, char **cause);
/* A CREDS notice into lease->creds and ->ncreds (the rest untouched). */
int ctl_parse_creds(const char *line, struct ctl_lease *lease, char **cause);
int ctl_parse_instance(
    const char *line, struct ctl_instance *inst, char **cause);

/* ---- ctl_selftest.c --------------------------------------------------------
 * SELFTEST and RELOADED (above): fields, encoder and parsers (no I/O).
 *   trigger  boot (n 0: before the command) | reload (n: RELOADED's)
 *   result   ok (every probe failed as it must) | fail
 *   probes   0..CTL_SELFTEST_PROBES_MAX (ok: at least 1)
 *   ms       0..CTL_SELFTEST_MS_MAX in the guest, or "-": unknown
 *   failed   "-" when ok; else the probe that got through, or what ksb-run
 *            saw instead of an answer (timeout, skipped): [a-z0-9-]{1,32}
 */
#define CTL_SELFTEST_PROBES_MAX 64
#define CTL_SELFTEST_MS_MAX	600000
struct ctl_selftest {
	char id[33];
	int reload;	 /* 0: boot, 1: after RELOADED n */
	uint64_t n;	 /* reload: RELOADED's n; boot: 0 */
	int ok;		 /* 1: passed */
	int probes;	 /* probes run */
	int64_t ms;	 /* -1: unknown */
	char failed[33]; /* "" when ok */
};
/* The request line of t into buf ('\n' included).  Its length, or -1 for
 * a field outside the ranges above or a buffer too small. */
int ctl_selftest_line(char *buf, size_t size, const struct ctl_selftest *t);
/* line (without '\n'): a SELFTEST request, checked strictly.  0, or -1
 * and *cause (what is wrong; guest-derived text is not quoted). */
int ctl_parse_selftest(const char *line, struct ctl_selftest *t, char **cause);
/* line (without '\n'): "RELOADED <n>"?  1 with *n, else 0. */
int ctl_parse_reloaded(const char *line, size_t len, uint64_t *n);
/* ---- ctlfwd.c --------------------------------------------------------------
 * FORWARD: ksb-run's record of a port forward (vmrunner/forward.c) for
 * the audit database, sent on the lease's connection only (the gateway
 * refuses it from any other connection), one line per event, positional
 * words, every one checked (ctl_fwd_parse):
 *   FORWARD <id> add ADDR PORT GPORT
 *   FORWARD <id> remove ADDR PORT GPORT REASON      (removed, stopped)
 *   FORWARD <id> open ADDR PORT GPORT STREAM PEER
 *   FORWARD <id> close ADDR PORT GPORT STREAM TO FROM MS REASON
 *                                  (reason: fwd_close_name, proto/fwd.h)
 *   FORWARD <id> refused ADDR PORT GPORT PEER REASON (limit, gone)
 *   -> no answer when the record is queued for the audit (a report: a
 *      busy forward must not fill the connection with answers); else
 *      "ERR forward: text", at most one a second per connection (a bad
 *      line, not the lease's connection, over the audit budget)
 * ADDR, PEER: an IPv4 or IPv6 address as inet_ntop(3) writes it; PORT
 * the listener's (1..65535), GPORT the guest's (1..65535); STREAM the
 * forward channel's stream id (1..2^32-1); TO, FROM bytes host -> guest
 * and guest -> host, MS the connection's duration in milliseconds
 * (decimal, 0..CTL_FWD_COUNT_MAX).
 */
#define CTL_FWD_COUNT_MAX (1LL << 53) /* largest byte count or duration */
enum ctl_fwd_event {
	CTL_FWD_ADD,
	CTL_FWD_REMOVE,
	CTL_FWD_OPEN,
	CTL_FWD_CLOSE,
	CTL_FWD_REFUSED,
	CTL_FWD_NEVENTS
};
struct ctl_fwd {
	char id[33];
	enum ctl_fwd_event event;
	char addr[46]; /* the listener's address */
	uint16_t port, guest_port;
	uint32_t stream; /* open, close; else 0 */
	char peer[46];	 /* open, refused; else "" */
	uint64_t to_guest, from_guest;
	int64_t ms;	 /* close; else 0 */
	char reason[16]; /* close, remove, refused; else "" */
};
/* ctl_fwd_event_name: "add", "remove", ... ("?" when out of range). */
const char *ctl_fwd_event_name(enum ctl_fwd_event e);
/*
 * ctl_fwd_line: the FORWARD request for ev into buf ('\n'-terminated,
 * size >= CTL_LINE_MAX).  Returns the length, or -1 when ev would not
 * pass ctl_fwd_parse.
 */
int ctl_fwd_line(char *buf, size_t size, const struct ctl_fwd *ev);
/*
 * ctl_fwd_parse: line (without its '\n') into *ev.  0, or -1 and *why
 * (a static text naming the bad word; the bytes are not quoted).
 */
int ctl_fwd_parse(const char *line, struct ctl_fwd *ev, const char **why);

#endif
