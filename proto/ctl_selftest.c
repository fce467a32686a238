/*
 * ctl_selftest.c: the control protocol's SELFTEST request and RELOADED
 * notice (proto/ctl.h): ksb-run reports its guest's enforcement
 * self-test, the gateway announces a reload.  No I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "proto/ctl.h"

/* [a-z0-9-]{1,32}: a probe's name (guest/selftest.c) or ksb-run's word. */
static int
ctl_selftest_name_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n < 1 || n > 32)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
			(s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* The fields' rules (proto/ctl.h), shared by the encoder and parser. */
static const char *
ctl_selftest_problem(const struct ctl_selftest *t)
{
	if (!util_valid_id(t->id))
		return "bad instance ID";
	if (t->reload ? t->n < 1 || t->n > (uint64_t)CTL_TURN_MAX : t->n != 0)
		return "bad reload number";
	if (t->probes < (t->ok ? 1 : 0) || t->probes > CTL_SELFTEST_PROBES_MAX)
		return "bad probe count";
	if (t->ms < -1 || t->ms > CTL_SELFTEST_MS_MAX)
		return "bad duration";
	if (t->ok ? t->failed[0] != '\0' : !ctl_selftest_name_ok(t->failed))
		return "bad failed-probe name";
	return NULL;
}

int
ctl_selftest_line(char *buf, size_t size, const struct ctl_selftest *t)
{
	char ms[24];
	int n;

	if (ctl_selftest_problem(t) != NULL)
		return -1;
	if (t->ms < 0)
		snprintf(ms, sizeof(ms), "-");
	else
		snprintf(ms, sizeof(ms), "%lld", (long long)t->ms);
	n = snprintf(buf, size, "SELFTEST %s %s %llu %s %d %s %s\n", t->id,
	    t->reload ? "reload" : "boot", (unsigned long long)t->n,
	    t->ok ? "ok" : "fail", t->probes, ms, t->ok ? "-" : t->failed);
	return n < 0 || (size_t)n >= size ? -1 : n;
}

/* A decimal in [0, max] with no sign, no leading zero: 0 with *v. */
static int
ctl_selftest_num(const char *s, long long max, long long *v)
{
	char *end;

	if (s[0] < '0' || s[0] > '9' || (s[0] == '0' && s[1] != '\0'))
		return -1;
	errno = 0;
	*v = strtoll(s, &end, 10);
	return *end != '\0' || errno != 0 || *v > max ? -1 : 0;
}

int
ctl_parse_selftest(const char *line, struct ctl_selftest *t, char **cause)
{
	char copy[CTL_LINE_MAX], *w[9], *save = NULL, *tok;
	const char *problem;
	long long v;
	int n = 0, ret = -1;

	memset(t, 0, sizeof(*t));
	if (strlen(line) >= sizeof(copy))
		return cause_set(cause, "SELFTEST: line too long");
	strcpy(copy, line);
	for (tok = strtok_r(copy, " ", &save); tok != NULL && n < 9;
	     tok = strtok_r(NULL, " ", &save))
		w[n++] = tok;
	if (n != 8 || strcmp(w[0], "SELFTEST") != 0 || strlen(w[1]) > 32)
		return cause_set(cause, "SELFTEST: want 7 fields");
	strcpy(t->id, w[1]);
	if (strcmp(w[2], "boot") != 0 && strcmp(w[2], "reload") != 0)
		goto bad;
	t->reload = w[2][0] == 'r';
	if (ctl_selftest_num(w[3], CTL_TURN_MAX, &v) != 0)
		goto bad;
	t->n = (uint64_t)v;
	if (strcmp(w[4], "ok") != 0 && strcmp(w[4], "fail") != 0)
		goto bad;
	t->ok = w[4][0] == 'o';
	if (ctl_selftest_num(w[5], CTL_SELFTEST_PROBES_MAX, &v) != 0)
		goto bad;
	t->probes = (int)v;
	t->ms = -1;
	if (strcmp(w[6], "-") != 0) {
		if (ctl_selftest_num(w[6], CTL_SELFTEST_MS_MAX, &v) != 0)
			goto bad;
		t->ms = v;
	}
	if (strcmp(w[7], "-") != 0) {
		if (strlen(w[7]) > 32)
			goto bad;
		strcpy(t->failed, w[7]);
	} else if (!t->ok)
		goto bad;
	if ((problem = ctl_selftest_problem(t)) != NULL)
		return cause_set(cause, "SELFTEST: %s", problem);
	ret = 0;
bad:
	if (ret != 0)
		cause_set(cause, "SELFTEST: a field is malformed");
	return ret;
}

int
ctl_parse_reloaded(const char *line, size_t len, uint64_t *n)
{
	char num[24];
	long long v;

	if (len < 10 || len > 9 + sizeof(num) - 1 ||
	    memcmp(line, "RELOADED ", 9) != 0)
		return 0;
	memcpy(num, line + 9, len - 9);
	num[len - 9] = '\0';
	if (ctl_selftest_num(num, CTL_TURN_MAX, &v) != 0 || v < 1)
		return 0;
	*n = (uint64_t)v;
	return 1;
}
