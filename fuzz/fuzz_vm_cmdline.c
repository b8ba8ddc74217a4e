/*
 * fuzz/fuzz_vm_cmdline.c: the vm guest init's kernel command line parser and mount planner
 * (agent/vm-init.c). The command line comes from the host, but a parser bug there would be
 * pid 1 crashing, so: any bytes, no crash, and an accepted line always gives a valid plan
 * whose device paths and mount options contain no separators (',' ':' ' ').
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/vm-init.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char line[5000];
	if (size >= sizeof(line))
		size = sizeof(line) - 1;
	memcpy(line, data, size);
	line[size] = '\0';
	struct agent_vm_opts o;
	struct agent_vm_plan p;
	struct rung_err err = { 0 };
	if (agent_vm_opts_parse(line, &o, &err) < 0) {
		if (!err.msg[0])
			abort(); /* an error always says what was wrong */
		return 0;
	}
	if (agent_vm_plan_build(&o, &p, &err) < 0)
		abort(); /* whatever the parser accepts, the planner must accept */
	if (p.n == 0 || p.steps[p.n - 1].kind != AGENT_VM_SWITCH)
		abort();
	if (strpbrk(o.root_dev, ",: ") || strpbrk(o.upper_dev, ",: ") || strpbrk(o.fstype, ",: /"))
		abort();
	return 0;
}
