/*
 * template.c: a guest restored from a template (vmrunner/template.c) is
 * made an instance of its own: the RNG reseeded from the host's seed, the
 * clock set from the host's, eth0 given the lease's MAC address (the
 * values parsed by proto/cmdline.c).
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

int
template_reseed(
    const unsigned char bytes[GUESTCTL_SEED_BYTES], char *err, size_t errcap)
{
	struct {
		struct rand_pool_info info;
		unsigned char buf[GUESTCTL_SEED_BYTES];
	} seed;
	int fd, ret = -1;

	memcpy(seed.buf, bytes, sizeof(seed.buf));
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
template_settime(uint64_t sec, long nsec, char *err, size_t errcap)
{
	struct timespec ts;

	ts.tv_sec = (time_t)sec;
	ts.tv_nsec = nsec;
	if (clock_settime(CLOCK_REALTIME, &ts) == -1) {
		snprintf(err, errcap, "clock_settime: %s", strerror(errno));
		return -1;
	}
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
