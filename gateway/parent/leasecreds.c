/*
 * leasecreds.c: the credentials a lease holder (ksb-run) is given for its
 * instance (proto/ctl.h): " cred=NAME/SECRET/PLACEHOLDER" per credential
 * of the instance's profile, on REGISTER's and RESUME's OK line
 * (control.c), and again as a CREDS notice when a reload changed them
 * (reload.c), so that a running guest gets a new credential's placeholder
 * and loses a removed one's.  What each holder was last given is kept as
 * a SHA-256 digest in struct instance (creds_md).
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>

#include "common/common.h"
#include "gateway/parent/parent.h"
#include "policy/policy.h"
#include "proto/ctl.h"

_Static_assert(POLICY_PROFILE_CREDS_MAX <= CTL_LEASE_CREDS_MAX,
    "a lease must carry every credential a profile may have");

char *
leasecreds_list(const struct gateway *gw, const struct instance *inst)
{
	const struct policy_cred *v[CTL_LEASE_CREDS_MAX];
	char ph[PLACEHOLDER_MAX], *s = xstrdup(""), *n;
	int k, i;

	k = policy_profile_creds(
	    gw->policy, inst->profile, v, CTL_LEASE_CREDS_MAX);
	for (i = 0; i < k && i < CTL_LEASE_CREDS_MAX; i++) {
		placeholder_make(placeholder_key(), inst->id, v[i]->name,
		    inst->owner_pid, inst->owner_start, v[i]->prefix, ph);
		xasprintf(
		    &n, "%s cred=%s/%s/%s", s, v[i]->name, v[i]->secret, ph);
		free(s);
		s = n;
	}
	return s;
}

void
leasecreds_given(struct instance *inst, const char *list)
{
	unsigned n = sizeof(inst->creds_md);

	if (EVP_Digest(list, strlen(list), inst->creds_md, &n, EVP_sha256(),
		NULL) != 1)
		fatalx("EVP_Digest");
}

void
leasecreds_reloaded(const struct gateway *gw)
{
	struct instance *inst;
	uint8_t old[32];
	char *s;

	for (inst = registry_first(); inst != NULL; inst = inst->next) {
		if (inst->owner == NULL)
			continue; /* not resumed yet: RESUME's OK has them */
		memcpy(old, inst->creds_md, sizeof(old));
		leasecreds_given(inst, s = leasecreds_list(gw, inst));
		if (memcmp(old, inst->creds_md, sizeof(old)) == 0) {
			free(s);
			continue;
		}
		if (client_sendf(inst->owner, "CREDS%s\n", s) != 0)
			log_warnx("instance %s: could not send its new "
				  "credentials to its ksb-run",
			    inst->id);
		else
			log_info("instance %s: its credentials changed: "
				 "sent to its ksb-run",
			    inst->id);
		free(s);
	}
}
