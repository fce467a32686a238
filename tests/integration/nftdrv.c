/*
 * nftdrv: drive gateway/net/nft.c and gateway/net/netdev.c from a shell test.
 *
 *   nftdrv setup BRIDGE ADDR PORT [TAP_PREFIX [TAP MAC IP]...]
 *				 (prefix default "ksbt"; guests in the batch)
 *   nftdrv check BRIDGE ADDR PORT [TAP_PREFIX [TAP MAC IP]...]
 *				 (nftcheck_run against that setup: "same"
 *				 or "drift KIND: TEXT", and its mean time)
 *   nftdrv add TAP MAC IP
 *   nftdrv del TAP MAC IP
 *   nftdrv teardown
 *   nftdrv bridge NAME ADDR/PREFIX
 *   nftdrv tap NAME BRIDGE	 (prints "ready", holds the tap until stdin EOF)
 *   nftdrv linkdel NAME
 *
 * Exit 0 on success; on failure prints the cause and exits 1 (2: usage).
 */
#include <arpa/inet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "gateway/net/net.h"

static void __attribute__((noreturn)) usage(void)
{
	fprintf(stderr,
	    "usage: nftdrv setup BRIDGE ADDR PORT [TAP_PREFIX "
	    "[TAP MAC IP]...] | "
	    "check (as setup) | add TAP MAC IP | del TAP MAC IP | teardown |\n"
	    "       bridge NAME ADDR/PREFIX | tap NAME BRIDGE | "
	    "linkdel NAME\n");
	exit(2);
}

static void
parse_ip(const char *s, uint32_t *addr)
{
	if (inet_pton(AF_INET, s, addr) != 1) {
		fprintf(stderr, "nftdrv: bad IPv4 address `%s'\n", s);
		exit(2);
	}
}

static void
parse_mac(const char *s, uint8_t mac[6])
{
	char end;

	if (sscanf(s, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx%c", &mac[0], &mac[1],
		&mac[2], &mac[3], &mac[4], &mac[5], &end) != 6) {
		fprintf(stderr, "nftdrv: bad MAC address `%s'\n", s);
		exit(2);
	}
}

/* setup's and check's arguments: BRIDGE ADDR PORT [PREFIX [TAP MAC IP]...] */
static void
parse_setup(int argc, char **argv, struct nft_params *p, struct nft_guest **g,
    size_t *ng)
{
	char *end;
	long port;
	size_t i;

	if (argc < 3 || (argc > 4 && (argc - 4) % 3 != 0))
		usage();
	memset(p, 0, sizeof(*p));
	p->bridge = argv[0];
	/* As the gateway: the bridge by index when it exists. */
	p->bridge_index = if_nametoindex(p->bridge);
	parse_ip(argv[1], &p->bridge_addr);
	port = strtol(argv[2], &end, 10);
	if (*end != '\0' || port < 1 || port > 65535)
		usage();
	p->proxy_port = (uint16_t)port;
	p->tap_prefix = argc == 4 ? argv[3] : "ksbt";
	*ng = argc > 4 ? (size_t)(argc - 4) / 3 : 0;
	*g = calloc(*ng + 1, sizeof(**g));
	for (i = 0; i < *ng; i++) {
		if (strlen(argv[4 + 3 * i]) >= sizeof((*g)[i].tap))
			usage();
		strcpy((*g)[i].tap, argv[4 + 3 * i]);
		parse_mac(argv[5 + 3 * i], (*g)[i].mac);
		parse_ip(argv[6 + 3 * i], &(*g)[i].addr);
	}
}

/* nftcheck_run CHECK_RUNS times: "same" or "drift KIND: TEXT", then the
 * mean time of one run in ms.  0, or -1 and *cause. */
#define CHECK_RUNS 20
static int
check(const struct nft_params *p, const struct nft_guest *g, size_t ng,
    char **cause)
{
	struct nftcheck_want w = { p, "ksb", g, ng, NULL, 0 };
	const char *kind = NULL;
	char *drift = NULL;
	int64_t t0 = util_mono_ms();
	int i, r = 0;

	for (i = 0; i < CHECK_RUNS && r == 0; i++)
		r = nftcheck_run(&w, &kind, &drift, cause);
	if (r == -1)
		return -1;
	if (r == 1)
		printf("drift %s: %s\n", kind, drift);
	else
		printf("same\n");
	printf("mean %.1f ms over %d runs\n", (double)(util_mono_ms() - t0) / i,
	    i);
	free(drift);
	return 0;
}

int
main(int argc, char **argv)
{
	struct nft_params p;
	struct nft_guest *g;
	size_t ng;
	uint8_t mac[6];
	uint32_t addr;
	char *cause = NULL, buf[256];
	const char *cmd;
	int prefix, fd, ret;

	if (argc < 2)
		usage();
	cmd = argv[1];
	argc -= 2;
	argv += 2;

	if (strcmp(cmd, "setup") == 0) {
		parse_setup(argc, argv, &p, &g, &ng);
		ret = nft_setup(&p, g, ng, &cause);
		free(g);
	} else if (strcmp(cmd, "check") == 0) {
		parse_setup(argc, argv, &p, &g, &ng);
		ret = check(&p, g, ng, &cause);
		free(g);
	} else if (strcmp(cmd, "add") == 0 || strcmp(cmd, "del") == 0) {
		if (argc != 3)
			usage();
		parse_mac(argv[1], mac);
		parse_ip(argv[2], &addr);
		if (cmd[0] == 'a')
			ret = nft_guest_add(argv[0], mac, addr, &cause);
		else
			ret = nft_guest_del(argv[0], mac, addr, &cause);
	} else if (strcmp(cmd, "teardown") == 0) {
		if (argc != 0)
			usage();
		ret = nft_teardown(&cause);
	} else if (strcmp(cmd, "bridge") == 0) {
		if (argc != 2)
			usage();
		if (util_parse_cidr4(argv[1], &addr, &prefix) != 0) {
			fprintf(stderr, "nftdrv: bad address `%s'\n", argv[1]);
			return 2;
		}
		ret = netdev_bridge_ensure(argv[0], addr, prefix, &cause);
	} else if (strcmp(cmd, "tap") == 0) {
		if (argc != 2)
			usage();
		ret = netdev_tap_create(argv[0], argv[1], &fd, &cause);
		if (ret == 0) {
			printf("ready\n");
			fflush(stdout);
			while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
				;
			close(fd);
		}
	} else if (strcmp(cmd, "linkdel") == 0) {
		if (argc != 1)
			usage();
		ret = netdev_link_del(argv[0], &cause);
	} else
		usage();

	if (ret != 0) {
		fprintf(stderr, "nftdrv %s: %s\n", cmd,
		    cause != NULL ? cause : "failed (no cause)");
		free(cause);
		return 1;
	}
	return 0;
}
