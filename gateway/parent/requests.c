/*
 * requests.c: the operator's decisions on CONNECTs held for one
 * (ksb-policy(5), `limit hold N'; the list is held.c): ALLOW and DENY
 * (ksbctl allow/deny, control.c; root or control-group only, and a guest
 * never reaches the control socket), and the grants for an agent turn.  A decision goes to the
 * proxy process (MSG_GRANT) and into the audit chain as a policy_versions
 * record whose files column says who decided what, with which scope.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "common/common.h"
#include "gateway/parent/parent.h"
#include "policy/policy.h"

#define GRANT_TTL_MAX_S (30LL * 86400) /* a duration scope, at most */

/* Grants for one agent turn (ksbctl prompt --allow): sent to the proxy
 * process when the turn starts (TURN), revoked when the next one does. */
#define TURN_GRANTS_MAX 256
struct turn_grant {
	struct msg_grant m; /* scope GRANT_INSTANCE while active */
	int64_t turn;
	int active;
};
static struct turn_grant turn_grants[TURN_GRANTS_MAX];
static size_t nturn_grants;

void
requests_turn(const char *instance, int64_t turn)
{
	size_t i, j;

	for (i = j = 0; i < nturn_grants; i++) {
		struct turn_grant *g = &turn_grants[i];

		if (strcmp(g->m.instance, instance) != 0) {
			turn_grants[j++] = *g;
			continue;
		}
		if (g->turn == turn && !g->active) {
			g->m.scope = GRANT_INSTANCE;
			privsep_grant(&g->m);
			g->active = 1;
		} else if (g->turn != turn && g->active) {
			g->m.scope = GRANT_REVOKE;
			privsep_grant(&g->m);
			continue; /* its turn is over */
		} else if (g->turn < turn)
			continue; /* a turn that never ran */
		turn_grants[j++] = *g;
	}
	nturn_grants = j;
}

/* "turn:N": m allowed while turn N of the instance runs.  0 or -1. */
static int
requests_turn_grant(const struct msg_grant *m, const char *n, char **cause)
{
	struct instance *inst = registry_find_id(m->instance);
	struct turn_grant *g;
	char *e = NULL;
	long long t = strtoll(n, &e, 10);

	if (n[0] < '1' || n[0] > '9' || *e != '\0' || t < 1)
		return cause_set(cause, "bad turn in the scope");
	if (nturn_grants == TURN_GRANTS_MAX)
		return cause_set(cause, "too many grants for turns");
	g = &turn_grants[nturn_grants++];
	memset(g, 0, sizeof(*g));
	g->m = *m;
	g->turn = t;
	if (inst != NULL)
		requests_turn(m->instance, inst->turn); /* it may run already */
	return 0;
}

void
requests_instance_gone(const char *instance)
{
	size_t i, j;

	held_instance_gone(instance);
	for (i = j = 0; i < nturn_grants; i++)
		if (strcmp(turn_grants[i].m.instance, instance) != 0)
			turn_grants[j++] = turn_grants[i];
	nturn_grants = j;
}

/* "host[:port]" (a name; port 1-65535, default 443) into m.  0 or -1. */
static int
requests_target(const char *target, struct msg_grant *m, char **cause)
{
	const char *colon = strrchr(target, ':');
	size_t len = colon ? (size_t)(colon - target) : strlen(target);
	unsigned long v = 443;
	char *e = NULL;

	if (colon != NULL) {
		v = strtoul(colon + 1, &e, 10);
		if (colon[1] < '0' || colon[1] > '9' || *e != '\0' || v < 1 ||
		    v > 65535)
			return cause_set(cause, "bad port in the target");
	}
	if (hostname_normalise(target, len, m->host, sizeof(m->host), NULL,
		NULL) != HOSTNAME_NAME)
		return cause_set(cause, "the target is not a host name");
	m->port = (uint16_t)v;
	return 0;
}

/* once | instance | a duration (90s, 30m, 1h, 7d) into m.  0 or -1. */
static int
requests_scope(const char *scope, struct msg_grant *m, char **cause)
{
	int64_t s;

	if (strcmp(scope, "once") == 0)
		m->scope = GRANT_ONCE;
	else if (strcmp(scope, "instance") == 0)
		m->scope = GRANT_INSTANCE;
	else if (util_parse_duration(scope, &s) == 0 && s > 0 &&
	    s <= GRANT_TTL_MAX_S) {
		m->scope = GRANT_UNTIL;
		m->ttl_ms = s * 1000;
	} else
		return cause_set(cause,
		    "bad scope (once, instance, or a duration up to 30d)");
	return 0;
}

/* The reload's errors on one line ("; " between them), at most ~1 KiB. */
static char *
requests_errors_line(const char *errors)
{
	char *s = xstrdup(errors ? errors : "unknown error"), *p;

	for (p = s; *p != '\0'; p++)
		if (*p == '\n')
			*p = ';';
	if (strlen(s) > 1024)
		strcpy(s + 1000, " ... (see the gateway's log)");
	return s;
}

/*
 * "permanent": m's target allowed for the instance's profile by a
 * drop-in file (grantfile.c), taken in by the normal reload (reload_run,
 * which announces it to the guests, as after SIGHUP): a reload that fails puts the
 * file back as it was and nothing is granted.  The new policy lets the
 * held connections through (proxy_policy_changed).
 * *path: the file written.  0 or -1.
 */
static int
requests_permanent(struct gateway *gw, const struct msg_grant *m, long uid,
    char *path, size_t pathsz, char **cause)
{
	struct instance *inst = registry_find_id(m->instance);
	struct grantfile_undo u;
	struct reload_info info;
	const char *rule = NULL;
	char *errors = NULL, *line;

	if (inst == NULL || gw->policy == NULL ||
	    !policy_has_profile(gw->policy, inst->profile))
		return cause_set(cause,
		    "profile `%s' is not in the running "
		    "policy",
		    inst != NULL ? inst->profile : "?");
	if (policy_match_host(gw->policy, inst->profile, m->host, m->port,
		&rule) == POLICY_ALLOW)
		return cause_set(cause,
		    "nothing written: %s already allows "
		    "%s:%u (%s)",
		    inst->profile, m->host, m->port, rule);
	if (grantfile_add(gw->conf, inst->profile, m->instance, m->host,
		m->port, uid, &u, cause) == -1)
		return -1;
	if (reload_run(gw, &info, &errors) == -1) {
		grantfile_undo(&u);
		line = requests_errors_line(errors);
		cause_set(cause,
		    "not granted: the reload failed, %s is as it was: %s",
		    u.path, line);
		free(line);
		free(errors);
		return -1;
	}
	free(info.notes);
	grantfile_done(&u);
	snprintf(path, pathsz, "%s", u.path);
	return 0;
}

int
requests_answer(struct gateway *gw, const char *id, const char *target,
    const char *scope, long uid, char **text, char **cause)
{
	struct msg_grant m;
	char path[4200] = "";
	int perm = scope != NULL && strcmp(scope, "permanent") == 0;

	*text = NULL;
	memset(&m, 0, sizeof(m));
	if (!util_valid_id(id) || registry_find_id(id) == NULL)
		return cause_set(
		    cause, "no instance `%s'", util_valid_id(id) ? id : "?");
	snprintf(m.instance, sizeof(m.instance), "%s", id);
	if (requests_target(target, &m, cause) == -1)
		return -1;
	if (scope == NULL)
		m.scope = GRANT_DENY;
	else if (strncmp(scope, "turn:", 5) == 0) {
		if (requests_turn_grant(&m, scope + 5, cause) == -1)
			return -1;
	} else if (perm) {
		if (requests_permanent(
			gw, &m, uid, path, sizeof(path), cause) == -1)
			return -1;
	} else if (requests_scope(scope, &m, cause) == -1)
		return -1;
	if (!perm && (scope == NULL || strncmp(scope, "turn:", 5) != 0))
		privsep_grant(&m);
	held_take(m.instance, m.host, m.port);
	xasprintf(text, "operator uid %ld: %s %s %s:%u%s%s%s%s", uid,
	    scope == NULL ? "deny" : "allow", m.instance, m.host, m.port,
	    scope != NULL ? " " : "", scope != NULL ? scope : "",
	    perm ? " " : "", path);
	log_info("%s", *text);
	/* The decision is a chained record: who, when, what, scope. */
	(void)audit_policy(gw->audit,
	    gw->policy != NULL ? policy_digest(gw->policy) : NULL, 1, *text,
	    NULL);
	return 0;
}
