// SPDX-License-Identifier: GPL-2.0
/*
 * The service's tenant keys (service/tenant.c), for host.d/26-cache-tenant:
 * each cgroup path given, cut as --tenant pod cuts it, one line each:
 * "cut PATH" after a Kubernetes pod cgroup, "whole PATH" where it has
 * none. With --pid PID KIND: the tenant of that process.
 *   tenant-key PATH...
 *   tenant-key --pid PID uid|cgroup|pod
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service.h"

int main(int argc, char **argv)
{
	char buf[TENANT_LEN];
	int kind, ret;

	if (argc == 4 && !strcmp(argv[1], "--pid")) {
		kind = tenant_kind_parse(argv[3]);
		if (kind < 0)
			return 2;
		ret = tenant_of((enum tenant_kind)kind, (pid_t)atoi(argv[2]),
				0, buf, sizeof(buf));
		if (ret) {
			printf("error %d\n", -ret);
			return 1;
		}
		printf("%s\n", buf);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		snprintf(buf, sizeof(buf), "%s", argv[i]);
		ret = tenant_pod_cut(buf);
		printf("%s %s\n", ret ? "cut" : "whole", buf);
	}
	return 0;
}
