/*
 * template.c: a guest restored from a template (vmrunner/template.c) is
 * made an instance of its own: the RNG reseeded from the host's seed, the
 * clock set from the host's, eth0 given the lease's MAC address.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"
#include "proto/guestctl.h"

static int
template_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
template_reseed(const char *hex, char *err, size_t errcap)
{
	struct {
		struct rand_pool_info info;
		unsigned char buf[GUESTCTL_SEED_BYTES];
	} seed;
	int fd, hi, lo, ret = -1;
	size_t i;

	if (strlen(hex) != 2 * GUESTCTL_SEED_BYTES) {
		snprintf(
		    err, errcap, "not %d hex digits", 2 * GUESTCTL_SEED_BYTES);
		return -1;
	}
	for (i = 0; i < GUESTCTL_SEED_BYTES; i++) {
		if ((hi = template_hex(hex[2 * i])) < 0 ||
		    (lo = template_hex(hex[2 * i + 1])) < 0) {
			snprintf(err, errcap, "not hex");
			goto out;
		}
		seed.buf[i] = (unsigned char)(hi << 4 | lo);
	}
	seed.info.entropy_count = 8 * GUESTCTL_SEED_BYTES;
	seed.info.buf_size = GUESTCTL_SEED_BYTES;
	if ((fd = open("/dev/random", O_WRONLY | O_CLOEXEC)) == -1) {
		snprintf(err, errcap, "/dev/random: %s", strerror(errno));
		goto out;
	}
	if (ioctl(fd, RNDADDENTROPY, &seed.info) == -1 ||
	    ioctl(fd, RNDRESEEDCRNG) == -1)
		snprintf(err, errcap, "RNDADDENTROPY, RNDRESEEDCRNG: %s",
		    strerror(errno));
	else
		ret = 0;
	close(fd);
out:
	explicit_bzero(&seed, sizeof(seed));
	return ret;
}

int
template_settime(const char *val, char *err, size_t errcap)
{
	struct timespec ts;
	const char *dot = strchr(val, '.');
	unsigned long s, ns;

	if (dot == NULL ||
	    guestctl_parse_uint(val, (size_t)(dot - val), 1UL << 40, &s) != 0 ||
	    strlen(dot + 1) != 9 || strspn(dot + 1, "0123456789") != 9) {
		snprintf(err, errcap, "not SEC.NSEC (9 digits)");
		return -1;
	}
	ns = strtoul(dot + 1, NULL, 10);
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)ns;
	if (clock_settime(CLOCK_REALTIME, &ts) == -1) {
		snprintf(err, errcap, "clock_settime: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int
template_parse_mac(const char *s, unsigned char mac[6])
{
	int i, hi, lo;

	if (strlen(s) != 17)
		return -1;
	for (i = 0; i < 6; i++) {
		if ((hi = template_hex(s[3 * i])) < 0 ||
		    (lo = template_hex(s[3 * i + 1])) < 0 ||
		    (i < 5 && s[3 * i + 2] != ':'))
			return -1;
		mac[i] = (unsigned char)(hi << 4 | lo);
	}
	if (mac[0] & 1)
		return -1; /* multicast */
	return 0;
}

int
template_set_mac(int s, const char *ifname, const unsigned char mac[6])
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
	return ioctl(s, SIOCSIFHWADDR, &ifr);
}
