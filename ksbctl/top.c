/*
 * top.c: `ksbctl top [-d SECONDS]', a full-screen live view (ncurses) of
 * every instance, refreshed every SECONDS (default 1):
 *
 *   - instances: the instance dirs (their state file, proto/instance.h:
 *     state, agent state and turn) and the gateway's registrations (LIST,
 *     with each one's traffic: open tunnels and bytes relayed, open
 *     tunnels included);
 *   - the rates: the change of the gateway's byte counts between the
 *     last refresh's count and this one's, over the time between them
 *     (LIST's at=), so a long download shows while it runs; without
 *     counts (an unprivileged user, an older gateway), the change per
 *     second of the audit's totals;
 *   - from the audit database, read-only as `ksbctl audit' reads it
 *     (ksb-audit(5)): the derived totals (totals_instance: connections,
 *     refused, bytes of the closed tunnels), open tunnels (allowed rows
 *     not closed yet) where the gateway gave no count, and the newest
 *     refusals;
 *   - the CONNECTs held for a decision (REQUESTS, proto/ctl.h; root or
 *     control-group).
 *
 * Keys: up/down select a held request, `a' allows it (ALLOW ... once),
 * `d' denies it (DENY), `q' quits.  Every text a guest could have chosen
 * (hosts, reasons, the agent's report) goes through log_escape.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <curses.h>
#include <sqlite3.h>

#include "common/common.h"
#include "proto/ctl.h"
#include "proto/instance.h"
#include "ksbctl/ksbctl.h"

#define TOP_INST_MAX 64 /* instances shown */
#define TOP_REQ_MAX  64 /* held requests kept */
#define TOP_DENY_MAX 6	/* recent refusals shown */

struct top_inst {
	char id[KSB_ID_MAX + 1];
	char state[16];
	char agent[16]; /* agent state, "-" if not agent mode */
	uint64_t turn;
	int64_t tunnels, conns, denied, up, down; /* -1: unknown */
	int64_t gw_tunnels, gw_up, gw_down;	  /* LIST's; -1: unknown */
	int64_t gw_at;				  /* when counted, unix ms */
	double up_rate, down_rate;		  /* bytes per second */
};

struct top_req {
	char inst[64], host[1024], port[16], turn[32], left[16], held[16];
};

struct top_deny {
	char when[16], inst[64], target[300], reason[64];
};

struct top {
	sqlite3 *db;
	int64_t last_ms; /* when inst[] was read, 0 never */
	struct top_inst inst[TOP_INST_MAX];
	size_t ninst;
	struct top_req req[TOP_REQ_MAX];
	size_t nreq;
	struct top_deny deny[TOP_DENY_MAX];
	size_t ndeny;
	size_t sel;	   /* the selected request */
	char req_err[256]; /* why REQUESTS failed, "" if it did not */
	char msg[256];	   /* the last decision's answer */
	char gw_err[256];  /* why LIST failed */
};

/* A new instance row (NULL when full); id copied, figures unknown. */
static struct top_inst *
top_inst_add(struct top_inst *v, size_t *n, const char *id, const char *st)
{
	struct top_inst *r;

	if (*n >= TOP_INST_MAX)
		return NULL;
	r = &v[(*n)++];
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	snprintf(r->state, sizeof(r->state), "%s", st);
	strcpy(r->agent, "-");
	r->tunnels = r->conns = r->denied = r->up = r->down = -1;
	r->gw_tunnels = r->gw_up = r->gw_down = r->gw_at = -1;
	return r;
}

/* The instance dirs (if readable) and the registrations without one. */
static void
top_read_instances(struct top *t, struct top_inst *v, size_t *n)
{
	struct ctl_instance *gw = NULL;
	struct instance_state st;
	struct top_inst *r;
	char **ids = NULL, *cause = NULL, *dir;
	size_t ngw = 0, i, j;

	*n = 0;
	if (instance_ids(ksbctl_conf->state_dir, &ids, &cause) == 0) {
		for (i = 0; ids[i] != NULL; i++) {
			dir = instance_dir(ksbctl_conf->state_dir, ids[i]);
			if (instance_state_read(dir, &st, &cause) != 0) {
				free(cause);
				cause = NULL;
				instance_state_init(&st);
			}
			r = top_inst_add(
			    v, n, ids[i], instance_status(dir, &st));
			if (r != NULL && st.agent) {
				log_escape(r->agent, sizeof(r->agent),
				    st.agent_state, strlen(st.agent_state));
				r->turn = st.agent_turn;
			}
			free(dir);
		}
		util_strv_free(ids);
	}
	free(cause);
	cause = NULL;
	t->gw_err[0] = '\0';
	if (ctl_list(ksbctl_conf->control_socket, &gw, &ngw, &cause) != 0) {
		snprintf(t->gw_err, sizeof(t->gw_err), "%s", cause);
		free(cause);
		return;
	}
	for (j = 0; j < ngw; j++) {
		for (i = 0; i < *n && strcmp(v[i].id, gw[j].id) != 0; i++)
			;
		r = i < *n ? &v[i] : top_inst_add(v, n, gw[j].id, "registered");
		if (r != NULL) {
			r->gw_tunnels = gw[j].tunnels;
			r->gw_up = gw[j].up;
			r->gw_down = gw[j].down;
			r->gw_at = gw[j].at_ms;
		}
	}
	free(gw);
}

/* One integer of sql (?1 the instance), or -1. */
static int64_t
top_int(sqlite3 *db, const char *sql, const char *id, int col)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (db == NULL ||
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, col);
	else
		v = 0; /* no row: nothing recorded yet */
	sqlite3_finalize(st);
	return v;
}

/*
 * The rates of r against o (the last refresh, secs ago): the gateway's
 * counts where both refreshes have them, over the time between the two
 * counts (0 where they went down, a new registration, or no new count
 * came), the audit's totals where neither has.
 */
static void
top_rates(struct top_inst *r, const struct top_inst *o, double secs)
{
	double span = (double)(r->gw_at - o->gw_at) / 1000.0;

	if (r->gw_up >= 0 && o->gw_up >= 0) {
		if (span > 0 && r->gw_up >= o->gw_up &&
		    r->gw_down >= o->gw_down) {
			r->up_rate = (double)(r->gw_up - o->gw_up) / span;
			r->down_rate = (double)(r->gw_down - o->gw_down) / span;
		}
	} else if (r->gw_up < 0 && o->gw_up < 0 && o->up >= 0 && r->up >= 0) {
		r->up_rate = (double)(r->up - o->up) / secs;
		r->down_rate = (double)(r->down - o->down) / secs;
	}
}

/* The audit's figures of r; rates against old (the last refresh). */
static void
top_read_figures(
    sqlite3 *db, struct top_inst *r, const struct top *old, int64_t now)
{
	static const char *tot = "SELECT connections, denied, bytes_up, "
				 "bytes_down FROM totals_instance WHERE "
				 "instance = ?1";
	double secs = (double)(now - old->last_ms) / 1000.0;
	size_t i;

	r->tunnels = r->gw_tunnels >= 0 ?
	    r->gw_tunnels :
	    top_int(db,
		"SELECT count(*) FROM connections WHERE decision = 'allow' "
		"AND closed_ms IS NULL AND instance = ?1",
		r->id, 0);
	r->conns = top_int(db, tot, r->id, 0);
	r->denied = top_int(db, tot, r->id, 1);
	r->up = top_int(db, tot, r->id, 2);
	r->down = top_int(db, tot, r->id, 3);
	if (old->last_ms == 0 || secs <= 0)
		return;
	for (i = 0; i < old->ninst; i++)
		if (strcmp(old->inst[i].id, r->id) == 0)
			top_rates(r, &old->inst[i], secs);
}

/* The newest refusals (of any instance) into t->deny. */
static void
top_read_denials(struct top *t)
{
	sqlite3_stmt *st = NULL;
	struct top_deny *d;
	const char *s;

	t->ndeny = 0;
	if (t->db == NULL ||
	    sqlite3_prepare_v2(t->db,
		"SELECT strftime('%H:%M:%S', ts_ms / 1000, 'unixepoch'), "
		"coalesce(instance, '-'), coalesce(host, '-') || ':' || "
		"coalesce(port, '-'), reason FROM connections WHERE "
		"decision = 'deny' ORDER BY ts_ms DESC, id DESC LIMIT 6",
		-1, &st, NULL) != SQLITE_OK)
		return;
	while (t->ndeny < TOP_DENY_MAX && sqlite3_step(st) == SQLITE_ROW) {
		d = &t->deny[t->ndeny++];
#define TOP_COL(f, i)                                                          \
	s = (const char *)sqlite3_column_text(st, i);                          \
	log_escape(d->f, sizeof(d->f), s ? s : "", s ? strlen(s) : 0)
		TOP_COL(when, 0);
		TOP_COL(inst, 1);
		TOP_COL(target, 2);
		TOP_COL(reason, 3);
#undef TOP_COL
	}
	sqlite3_finalize(st);
}

/* REQUESTS into t->req (fields escaped by requests_field). */
static void
top_read_requests(struct top *t)
{
	char *reply = NULL, *cause = NULL, *line, *save = NULL;
	struct top_req *q;

	t->nreq = 0;
	t->req_err[0] = '\0';
	if (ctl_call(ksbctl_conf->control_socket, "REQUESTS\n", &reply,
		&cause) == -1) {
		snprintf(t->req_err, sizeof(t->req_err), "%s", cause);
		free(cause);
		return;
	}
	for (line = strtok_r(reply, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "ERR ", 4) == 0) {
			log_escape(t->req_err, sizeof(t->req_err), line + 4,
			    strlen(line + 4));
			break;
		}
		if (strncmp(line, "REQUEST ", 8) != 0 || t->nreq >= TOP_REQ_MAX)
			continue;
		q = &t->req[t->nreq++];
		requests_field(line, "instance", q->inst, sizeof(q->inst));
		requests_field(line, "host", q->host, sizeof(q->host));
		requests_field(line, "port", q->port, sizeof(q->port));
		requests_field(line, "turn", q->turn, sizeof(q->turn));
		requests_field(line, "left", q->left, sizeof(q->left));
		requests_field(line, "held", q->held, sizeof(q->held));
	}
	free(reply);
	if (t->sel >= t->nreq)
		t->sel = t->nreq ? t->nreq - 1 : 0;
}

/* Everything, once. */
static void
top_read(struct top *t)
{
	struct top_inst *v = xcalloc(TOP_INST_MAX, sizeof(*v));
	int64_t now = util_now_ms();
	size_t i, n;

	top_read_instances(t, v, &n);
	for (i = 0; i < n; i++)
		top_read_figures(t->db, &v[i], t, now);
	memcpy(t->inst, v, n * sizeof(*v));
	t->ninst = n;
	t->last_ms = now;
	free(v);
	top_read_denials(t);
	top_read_requests(t);
}

/* A figure for the table: "-" when unknown. */
static const char *
top_num(char *buf, size_t cap, int64_t v)
{
	if (v < 0)
		snprintf(buf, cap, "-");
	else
		snprintf(buf, cap, "%lld", (long long)v);
	return buf;
}

/* The instances' table from row y on; the next free row. */
static int
top_draw_instances(const struct top *t, int y)
{
	char a[24], b[24], c[24], d[24], e[24], ur[16], dr[16], turn[24];
	size_t i;

	attron(A_BOLD);
	mvprintw(y++, 0, "%-16s %-10s %-9s %5s %7s %6s %6s %10s %10s %12s %12s",
	    "INSTANCE", "STATE", "AGENT", "TURN", "TUNNELS", "CONNS", "DENIED",
	    "UP/s", "DOWN/s", "UP", "DOWN");
	attroff(A_BOLD);
	for (i = 0; i < t->ninst; i++) {
		const struct top_inst *r = &t->inst[i];

		snprintf(
		    turn, sizeof(turn), "%llu", (unsigned long long)r->turn);
		ksbctl_size(ur, sizeof(ur),
		    (uint64_t)(r->up_rate > 0 ? r->up_rate : 0));
		ksbctl_size(dr, sizeof(dr),
		    (uint64_t)(r->down_rate > 0 ? r->down_rate : 0));
		mvprintw(y++, 0,
		    "%-16s %-10s %-9s %5s %7s %6s %6s %10s %10s %12s %12s",
		    r->id, r->state, r->agent, r->turn ? turn : "-",
		    top_num(a, sizeof(a), r->tunnels),
		    top_num(b, sizeof(b), r->conns),
		    top_num(c, sizeof(c), r->denied), ur, dr,
		    top_num(d, sizeof(d), r->up),
		    top_num(e, sizeof(e), r->down));
	}
	if (t->ninst == 0)
		mvprintw(y++, 0, "(no instances)");
	if (t->gw_err[0] != '\0')
		mvprintw(y++, 0, "gateway: %.200s", t->gw_err);
	return y;
}

/* The held requests (the selected one marked) and the refusals. */
static int
top_draw_requests(const struct top *t, int y)
{
	size_t i;

	attron(A_BOLD);
	mvprintw(++y, 0,
	    "HELD FOR A DECISION (up/down select, a allow once, "
	    "d deny)");
	attroff(A_BOLD);
	y++;
	if (t->req_err[0] != '\0')
		mvprintw(y++, 0, "  requests: %.200s", t->req_err);
	else if (t->nreq == 0)
		mvprintw(y++, 0, "  (none)");
	for (i = 0; i < t->nreq && y < LINES - TOP_DENY_MAX - 4; i++) {
		const struct top_req *q = &t->req[i];

		if (i == t->sel)
			attron(A_REVERSE);
		mvprintw(y++, 0, "%c %-16s %.60s:%s turn %s, %ss left, %s held",
		    i == t->sel ? '>' : ' ', q->inst, q->host, q->port,
		    strcmp(q->turn, "0") == 0 ? "-" : q->turn, q->left,
		    q->held);
		if (i == t->sel)
			attroff(A_REVERSE);
	}
	attron(A_BOLD);
	mvprintw(++y, 0, "RECENT REFUSALS");
	attroff(A_BOLD);
	y++;
	for (i = 0; i < t->ndeny; i++)
		mvprintw(y++, 0, "  %s %-16s %.60s %s", t->deny[i].when,
		    t->deny[i].inst, t->deny[i].target, t->deny[i].reason);
	if (t->ndeny == 0)
		mvprintw(y++, 0, "  (none)");
	return y;
}

static void
top_draw(const struct top *t, int delay)
{
	char when[16];
	time_t now = time(NULL);
	struct tm tm;
	int y;

	erase();
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	mvprintw(0, 0, "ksbctl top  %s UTC  every %ds  q quit", when, delay);
	y = top_draw_instances(t, 2);
	y = top_draw_requests(t, y);
	if (t->msg[0] != '\0')
		mvprintw(y + 1, 0, "%.200s", t->msg);
	refresh();
}

/* `a' or `d' on the selected request: ALLOW once or DENY; answer in msg. */
static void
top_decide(struct top *t, int allow)
{
	const struct top_req *q;
	char *line, *reply = NULL, *cause = NULL;

	if (t->nreq == 0) {
		snprintf(t->msg, sizeof(t->msg), "no request selected");
		return;
	}
	q = &t->req[t->sel];
	/* The fields came escaped; a host with an escape is not one ALLOW
	 * could name, and the gateway refuses it. */
	xasprintf(&line, "%s %s %s:%s%s\n", allow ? "ALLOW" : "DENY", q->inst,
	    q->host, q->port, allow ? " once" : "");
	if (ctl_call(ksbctl_conf->control_socket, line, &reply, &cause) == -1)
		snprintf(t->msg, sizeof(t->msg), "%s: %s",
		    allow ? "allow" : "deny", cause);
	else {
		reply[strcspn(reply, "\n")] = '\0';
		log_escape(t->msg, sizeof(t->msg), reply, strlen(reply));
	}
	free(line);
	free(reply);
	free(cause);
}

/* Keys until `q'; the view read again every delay seconds. */
static void
top_loop(struct top *t, int delay)
{
	int64_t next = 0;
	int ch;

	for (;;) {
		if (util_now_ms() >= next) {
			top_read(t);
			next = util_now_ms() + (int64_t)delay * 1000;
		}
		top_draw(t, delay);
		timeout(
		    (int)(next - util_now_ms() > 0 ? next - util_now_ms() : 0));
		ch = getch();
		if (ch == 'q' || ch == 'Q')
			return;
		if (ch == KEY_UP && t->sel > 0)
			t->sel--;
		else if (ch == KEY_DOWN && t->sel + 1 < t->nreq)
			t->sel++;
		else if (ch == 'a' || ch == 'd') {
			top_decide(t, ch == 'a');
			next = 0; /* show what the decision did */
		}
	}
}

int
top_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "delay", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct top *t;
	SCREEN *scr;
	char *end;
	long delay = 1;
	int ch;

	optind = 0; /* glibc: reinitialise (argv permutation) */
	while ((ch = ksbctl_getopt(argc, argv, "top", "d:h", longopts)) != -1) {
		switch (ch) {
		case 'd':
			delay = strtol(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || delay < 1 ||
			    delay > 3600) {
				fprintf(stderr,
				    "ksbctl top: -d: `%s' is not "
				    "1..3600 seconds\n",
				    optarg);
				return 2;
			}
			break;
		case 'h':
			return ksbctl_usage(stdout, "top");
		default:
			return ksbctl_usage(stderr, "top");
		}
	}
	if (optind != argc)
		return ksbctl_bad_arg("top", argv[optind]);
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		fprintf(stderr, "ksbctl top: needs a terminal\n");
		return 1;
	}
	t = xcalloc(1, sizeof(*t));
	if ((t->db = audit_db_open()) == NULL) {
		free(t);
		return 1;
	}
	if ((scr = newterm(NULL, stdout, stdin)) == NULL) {
		fprintf(stderr, "ksbctl top: cannot use terminal `%s'\n",
		    getenv("TERM") ? getenv("TERM") : "(TERM unset)");
		sqlite3_close(t->db);
		free(t);
		return 1;
	}
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	top_loop(t, (int)delay);
	endwin();
	delscreen(scr);
	sqlite3_close(t->db);
	free(t);
	return 0;
}
