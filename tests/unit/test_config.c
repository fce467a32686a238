/*
 * test_config.c: ksb-run's settings (vmrunner/config.c): layers and
 * origins, lists, command splitting, errors as file:line, sizes, the cpu
 * and ca-file settings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "vmrunner/vmrunner.h"
#include "tests/unit/tap.h"

static void
test_config(void)
{
	struct config *c = config_new();
	char *cause = NULL, *const *list, **cmd;
	size_t n;
	uint64_t mib;
	const char *file =
	    "# project\n"
	    "cpus = 2\n"
	    "memory=1024   # comment\n"
	    "share-ro = /a\n"
	    "share-ro = /b:/data\n"
	    "secret = TOKEN=env:T\n"
	    "command = claude --model 'x y' \"a\\\"b\"\n";

	CHECK(strcmp(config_get(c, "memory"), "512") == 0 &&
	    strcmp(config_origin(c, "memory"), "default") == 0, "default memory 512");
	CHECK(config_parse(c, "p.conf", file, strlen(file), &cause) == 0,
	    "project file parses (%s)", cause ? cause : "");
	CHECK(config_uint(c, "cpus") == 2 && strcmp(config_origin(c, "cpus"), "p.conf:2") == 0,
	    "cpus 2 from p.conf:2");
	CHECK(config_set(c, CONFIG_FLAG, "cpus", "4", "--cpus", &cause) == 0 &&
	    config_uint(c, "cpus") == 4 && strcmp(config_origin(c, "cpus"), "--cpus") == 0,
	    "flag overrides the file");
	CHECK(config_set(c, CONFIG_FILE, "cpus", "3", "late:1", &cause) == 0 &&
	    config_uint(c, "cpus") == 4, "a lower layer never overrides a flag");
	list = config_list(c, "share-ro", &n);
	CHECK(n == 2 && strcmp(list[1], "/b:/data") == 0, "file list kept in order");
	CHECK(config_set(c, CONFIG_FLAG, "share-ro", "/c", "--share-ro", &cause) == 0 &&
	    (list = config_list(c, "share-ro", &n)) != NULL && n == 1 &&
	    strcmp(list[0], "/c") == 0, "flag list replaces the file's list");
	cmd = config_command(c);
	CHECK(cmd != NULL && cmd[0] && cmd[1] && cmd[2] && cmd[3] && !cmd[4] &&
	    strcmp(cmd[2], "x y") == 0 && strcmp(cmd[3], "a\"b") == 0,
	    "command split with quotes");
	util_strv_free(cmd);
	CHECK(config_set(c, CONFIG_FLAG, "memory", "100", "--memory", &cause) == -1 &&
	    strstr(cause, "`100'") != NULL, "memory below 128 refused, value quoted");
	free(cause);
	cause = NULL;
	CHECK(config_set(c, CONFIG_FLAG, "secret", "TOKEN=plain", "--secret", &cause) == -1,
	    "secret without env:/file: refused");
	free(cause);
	cause = NULL;
	CHECK(config_parse(c, "bad.conf", "cpus = 0\nnope\nfoo = 1\n", 21, &cause) == -1 &&
	    strstr(cause, "bad.conf:1:") && strstr(cause, "bad.conf:2:") &&
	    strstr(cause, "bad.conf:3: unknown setting `foo'"), "every error as file:line");
	free(cause);
	CHECK(config_parse_size("8G", &mib) == 0 && mib == 8192, "8G = 8192 MiB");
	CHECK(config_parse_size("63M", &mib) == -1 && config_parse_size("G", &mib) == -1,
	    "sizes below 64M or without digits refused");
	cause = NULL;
	CHECK(strcmp(config_get(c, "template"), "auto") == 0 &&
	    strcmp(config_origin(c, "template"), "default") == 0,
	    "template: auto by default");
	CHECK(config_set(c, CONFIG_CONF, "template", "on", "ksb.conf", &cause) ==
		0 &&
	    config_set(c, CONFIG_FLAG, "template", "off", "--template",
		&cause) == 0 &&
	    config_template(c, QEMU_ACCEL_TCG) == 0 &&
	    strcmp(config_origin(c, "template"), "--template") == 0,
	    "template: ksb.conf's on, the flag's off wins, also under TCG");
	CHECK(config_set(c, CONFIG_FILE, "template", "maybe", "p.conf:1",
		  &cause) == -1 &&
	    strstr(cause, "`maybe' is not auto, on or off") != NULL,
	    "template: auto or a boolean (%s)", cause);
	free(cause);
	config_free(c);
}

/* template = auto: on under TCG, off under KVM, shown resolved. */
static void
test_template_auto(void)
{
	struct config *c = config_new();
	char *cause = NULL;

	CHECK(config_template(c, QEMU_ACCEL_TCG) == 1 &&
	    strcmp(config_get(c, "template"), "on") == 0 &&
	    strcmp(config_origin(c, "template"), "default (auto: TCG)") == 0,
	    "template auto under TCG: on, shown as such (%s)",
	    config_origin(c, "template"));
	config_free(c);
	c = config_new();
	CHECK(config_template(c, QEMU_ACCEL_KVM) == 0 &&
	    strcmp(config_get(c, "template"), "off") == 0 &&
	    strcmp(config_origin(c, "template"), "default (auto: KVM)") == 0,
	    "template auto under KVM: off (the KVM path as it was)");
	CHECK(config_set(c, CONFIG_FILE, "template", "auto", "p.conf:2",
		  &cause) == 0 &&
	    config_template(c, QEMU_ACCEL_TCG) == 1 &&
	    strcmp(config_origin(c, "template"), "p.conf:2 (auto: TCG)") == 0,
	    "template auto from a file keeps its origin");
	CHECK(config_set(c, CONFIG_FLAG, "template", "on", "--template",
		  &cause) == 0 &&
	    config_template(c, QEMU_ACCEL_KVM) == 1 &&
	    strcmp(config_get(c, "template"), "on") == 0 &&
	    strcmp(config_origin(c, "template"), "--template") == 0,
	    "template on under KVM: on, as asked");
	CHECK(config_set(c, CONFIG_FLAG, "template", "no", "--template",
		  &cause) == 0 &&
	    config_template(c, QEMU_ACCEL_TCG) == 0,
	    "template no under TCG: off");
	free(cause);
	config_free(c);
}

/* The cpu, ca-file and machine settings. */
static void
test_config_cpu(void)
{
	struct config *cfg = config_new();
	char *cause = NULL;

	CHECK(strcmp(config_get(cfg, "cpu"), "auto") == 0 &&
	    config_get(cfg, "ca-file") == NULL, "cpu defaults to auto, no ca-file");
	CHECK(config_set(cfg, CONFIG_CONF, "cpu", "Nehalem", "ksb.conf", &cause) == 0 &&
	    config_set(cfg, CONFIG_FILE, "cpu", "max", "f:1", &cause) == 0 &&
	    config_set(cfg, CONFIG_FLAG, "cpu", "host", "--cpu", &cause) == 0 &&
	    strcmp(config_get(cfg, "cpu"), "host") == 0 &&
	    strcmp(config_origin(cfg, "cpu"), "--cpu") == 0, "cpu layered: flag wins");
	CHECK(config_set(cfg, CONFIG_FLAG, "cpu", "max -x", "--cpu", &cause) == -1 &&
	    cause != NULL && strstr(cause, "max -x") != NULL, "bad cpu quoted (%s)",
	    cause ? cause : "");
	free(cause);
	cause = NULL;
	CHECK(config_set(cfg, CONFIG_FILE, "ca-file", "/t/ca.pem", "f:2", &cause) == 0 &&
	    strcmp(config_get(cfg, "ca-file"), "/t/ca.pem") == 0, "ca-file set");
	CHECK(strcmp(config_get(cfg, "machine"), "auto") == 0 &&
	    strcmp(config_origin(cfg, "machine"), "default") == 0,
	    "machine defaults to auto");
	CHECK(config_set(cfg, CONFIG_CONF, "machine", "q35", "ksb.conf", &cause) == 0 &&
	    config_set(cfg, CONFIG_FILE, "machine", "pc", "f:3", &cause) == 0 &&
	    config_set(cfg, CONFIG_FLAG, "machine", "microvm", "--machine", &cause) == 0 &&
	    strcmp(config_get(cfg, "machine"), "microvm") == 0 &&
	    strcmp(config_origin(cfg, "machine"), "--machine") == 0,
	    "machine layered: flag wins");
	CHECK(config_set(cfg, CONFIG_FLAG, "machine", "virt", "--machine", &cause) == -1 &&
	    cause != NULL && strstr(cause, "`virt'") != NULL, "bad machine quoted (%s)",
	    cause ? cause : "");
	free(cause);
	config_free(cfg);
}

/* Any agent's pane patterns and hooks: bounded, no control byte. */
static void
test_config_agent(void)
{
	struct config *cfg = config_new();
	char long_pat[GUESTCTL_PANE_MAX + 2];
	char *cause = NULL;
	const char *bad[][2] = { { "agent-ready", "" },
		{ "agent-busy", "a\tb" }, { "agent-hooks", "stop" },
		{ "agent-ready", long_pat } };
	size_t i;

	memset(long_pat, 'x', sizeof(long_pat) - 1);
	long_pat[sizeof(long_pat) - 1] = '\0';
	CHECK(config_get(cfg, "agent-ready") == NULL &&
	    config_get(cfg, "agent-hooks") == NULL, "no patterns by default");
	CHECK(config_set(cfg, CONFIG_FILE, "agent-ready", "> |READY", "f:1",
	    &cause) == 0 && config_set(cfg, CONFIG_FLAG, "agent-hooks",
	    "submit,end", "--agent-hooks", &cause) == 0 &&
	    strcmp(config_get(cfg, "agent-ready"), "> |READY") == 0,
	    "agent-ready and agent-hooks set");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(config_set(cfg, CONFIG_FLAG, bad[i][0], bad[i][1], "--x",
		    &cause) == -1 && cause != NULL &&
		    strncmp(cause, bad[i][0], strlen(bad[i][0])) == 0,
		    "%s refused (%s)", bad[i][0], cause ? cause : "");
		free(cause);
		cause = NULL;
	}
	config_free(cfg);
}

int
main(void)
{
	log_init("test_config", 0);
	test_config();
	test_config_cpu();
	test_config_agent();
	test_template_auto();
	return tap_done();
}
