/*
 * agentsock.c: the rules of the agent socket's messages (agentsock.h),
 * shared by its server (vmrunner/agent.c) and its clients (ksbctl).
 */
#include "proto/agentsock.h"

int
agentsock_valid_key(const char *k, size_t len)
{
	size_t i;

	if (len == 0 || len > AGENTSOCK_KEY_MAX)
		return 0;
	for (i = 0; i < len; i++)
		if (!((k[i] >= 'a' && k[i] <= 'z') ||
			(k[i] >= 'A' && k[i] <= 'Z') ||
			(k[i] >= '0' && k[i] <= '9') || k[i] == '.' ||
			k[i] == '_' || k[i] == '-'))
			return 0;
	return 1;
}
