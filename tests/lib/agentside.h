/*
 * tests/lib/agentside.h: the attacks a command makes on the agent side of its own sandbox
 * (rung-agent, pid 1, and its per-request handlers, which run as RUNG_AGENT_UID), shared by
 * the process/vm suite (check_e2e_process_agentside.c) and the container one
 * (check_e2e_container_agentside.c). Agent-side processes are found by name (rung-agent,
 * rung-agent-h). Every line of output starting "BAD:" is an attack that worked; "agents N"
 * counts the agent-side processes found.
 */
#ifndef RUNG_TESTS_LIB_AGENTSIDE_H
#define RUNG_TESTS_LIB_AGENTSIDE_H

#include "common/proto.h"

/* ptrace attach/seize and process_vm_readv on pid argv[1]; exits 1 if any worked. */
#define AGENTSIDE_PTRACE_PY                                                                        \
	"import ctypes, sys\n"                                                                     \
	"l = ctypes.CDLL(None, use_errno=True)\n"                                                  \
	"l.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]\n"    \
	"pid = int(sys.argv[1]); bad = []\n"                                                       \
	"for req in (16, 0x4206):\n"                                                               \
	"    if l.ptrace(req, pid, None, None) == 0:\n"                                            \
	"        bad.append(req); l.ptrace(17, pid, None, None)\n"                                 \
	"class iov(ctypes.Structure):\n"                                                           \
	"    _fields_ = [('b', ctypes.c_void_p), ('n', ctypes.c_size_t)]\n"                        \
	"buf = ctypes.create_string_buffer(8)\n"                                                   \
	"loc = iov(ctypes.cast(buf, ctypes.c_void_p), 8); rem = iov(0x400000, 8)\n"                \
	"n = l.process_vm_readv(pid, ctypes.byref(loc), 1, ctypes.byref(rem), 1, 0)\n"             \
	"if n >= 0 or ctypes.get_errno() not in (1, 3, 38): bad.append('vm_readv')\n"              \
	"sys.exit(1 if bad else 0)\n"

/* Run from inside (sh -c), with the python above at /tmp/ptrace-probe.py when python3 exists:
 * every agent-side pid is stopped, has its oom_score_adj raised, its environ and fds read,
 * ptrace'd; root-owned kernel knobs (core_pattern, sysrq-trigger) are written; last, every
 * agent-side pid is SIGKILLed. */
#define AGENTSIDE_PROBE_SH                                                                         \
	"n=0; pids=\n"                                                                             \
	"for d in /proc/[0-9]*; do\n"                                                              \
	"  p=${d#/proc/}\n"                                                                        \
	"  c=$(cat $d/comm 2>/dev/null)\n"                                                         \
	"  case \"$c\" in rung-agent*) ;; *) continue ;; esac\n"                                   \
	"  set -- $(grep '^Uid:' $d/status)\n"                                                     \
	"  [ \"$2\" = " RUNG_STR(                                                                  \
	    RUNG_AGENT_UID) " ] || echo \"BAD: $c $p runs as uid $2\"\n"                           \
			    "  n=$((n+1)); pids=\"$pids $p\"\n"                                    \
			    "  before=$(cat $d/oom_score_adj)\n"                                   \
			    "  if kill -STOP $p 2>/dev/null; then echo \"BAD: SIGSTOP $p\"; kill " \
			    "-CONT $p; fi\n"                                                       \
			    "  (echo 1000 > $d/oom_score_adj) 2>/dev/null && echo \"BAD: wrote "   \
			    "oom_score_adj $p\"\n"                                                 \
			    "  [ \"$(cat $d/oom_score_adj)\" = \"$before\" ] || echo \"BAD: "      \
			    "oom_score_adj $p moved\"\n"                                           \
			    "  head -c 1 $d/environ >/dev/null 2>&1 && echo \"BAD: read environ "  \
			    "$p\"\n"                                                               \
			    "  ls $d/fd/ >/dev/null 2>&1 && echo \"BAD: listed fds $p\"\n"         \
			    "  if command -v python3 >/dev/null; then\n"                           \
			    "    python3 /tmp/ptrace-probe.py $p || echo \"BAD: ptrace $p\"\n"     \
			    "  fi\n"                                                               \
			    "done\n"                                                               \
			    "(echo '|/bin/false' > /proc/sys/kernel/core_pattern) 2>/dev/null &&"  \
			    " echo \"BAD: wrote core_pattern\"\n"                                  \
			    "(echo h > /proc/sysrq-trigger) 2>/dev/null && echo \"BAD: wrote "     \
			    "sysrq-trigger\"\n"                                                    \
			    "for p in $pids; do kill -9 $p 2>/dev/null && echo \"BAD: SIGKILL "    \
			    "$p\"; done\n"                                                         \
			    "echo \"agents $n\"; echo \"own oom_score_adj $(cat "                  \
			    "/proc/self/oom_score_adj)\"\n"

#define RUNG_STR_(x) #x
#define RUNG_STR(x) RUNG_STR_(x)

#endif
