# vmm/guest/l1-rung.sh: sourced by l1-tests.sh (busybox sh) where /dev/kvm works. The vm rung
# END TO END through the runtime: `rung run --isolation vm --image ... -- python3 -c ...` and
# the protocol through the CLI (files, warm reuse, suspend/resume, dispose), using the store
# payload-rung.sh prepared (copied to scratch: the payload is read-only).
# Uses pass/fail/skip, $P and $W from l1-tests.sh.
R=$P/rung/bin/rung

# Templates and clones (docs/snapshots.md, issue 19): `rung snapshot` of a running sandbox, two
# clones from it (their RNG output and hostname differ, both see the template's file, the clock
# is L1's), a clone whose spec differs refused naming the field, a clone after every
# supervisor was killed, a corrupted template refused and the clone never booted, `rung
# snapshot rm` leaving nothing. Called inside the runtime block below ($R, $S set).
t_rung_snapclone() {
	only_rung rung-snapclone-vm || return 0
	sc=$W/sc
	rm -rf "$sc" && mkdir -p "$sc"
	tdir=$S/templates/base
	# sc_acq AGENT [MORE-FLAGS]: acquire on the template's spec; the id, or empty
	sc_acq() {
		sc_a=$1
		shift
		"$R" acquire --isolation vm --image rung/vmtest:py --memory 256M --kind sc --scope l1 \
			--thread t --agent "$sc_a" "$@" 2>"$sc/$sc_a.err"
	}
	sc_err() { tr '\n' ' ' <"$sc/$1.err" | cut -c1-300; }
	# sc_trace FILE: where the time went (RUNG_TRACE lines: "phase +ms", from the first)
	sc_trace() { awk '{ t = $2 / 1000; if (!s) s = p = t; $1 = $2 = $3 = ""; sub(/^ +/, ""); printf "%s +%d; ", $0, t - p; p = t }' "$1" 2>/dev/null; }
	t0=$(now)
	src=$(sc_acq src)
	boot_ms=$(ms_since "$t0")
	if [ -z "$src" ]; then
		fail rung-snapclone-vm "acquire the source: $(sc_err src)"
		return 0
	fi
	echo "from the template" | "$R" write "$src" notes/t.txt
	t0=$(now)
	RUNG_TRACE=$sc/trace-snap "$R" --json snapshot "$src" base >"$sc/snap.json" 2>"$sc/snap.err"
	rc=$?
	snap_ms=$(ms_since "$t0")
	modes=$(ls -ln "$tdir" 2>&1 | awk 'NF > 5 { printf "%s %s %s; ", $1, $3, $9 }')
	still=$("$R" exec "$src" -- cat /work/notes/t.txt 2>&1)
	"$R" snapshot "$src" base >"$sc/again.err" 2>&1 && again=accepted || again=refused
	listed=$("$R" --json snapshot ls 2>&1)
	why=
	[ "$rc" = 0 ] || why="snapshot rc=$rc: $(sc_err snap)"
	[ -n "$why" ] || [ "$still" = "from the template" ] || why="the source after the save: '$still'"
	if [ -z "$why" ] && { [ "$again" != refused ] || ! grep -q "exists" "$sc/again.err"; }; then
		why="the same name again: $again $(sc_err again)"
	fi
	case "$listed" in *'"name": "base"'* | *'"name":"base"'*) ;; *) why="${why:-ls: $listed}" ;; esac
	for want_mode in "-rw-r--r-- 0 vm.snap" "-rw------- 0 template.json" "-rw------- 0 upper.ext4"; do
		case "$modes" in *"$want_mode"*) ;; *) why="${why:-the template's files: $modes}" ;; esac
	done
	if [ -n "$why" ]; then
		fail rung-snapclone-vm "$why"
	else
		pass rung-snapclone-vm "rung snapshot in ${snap_ms} ms (the source runs on, files intact; the name again refused): $modes steps (ms): $(sc_trace "$sc/trace-snap")"
	fi
	# two clones: their own RNG, hostname; the template's file; L1's clock
	t0=$(now)
	c1=$(RUNG_TRACE=$sc/trace-c1 sc_acq c1 --from-snapshot base)
	c1_ms=$(ms_since "$t0")
	t0=$(now)
	c2=$(sc_acq c2 --from-snapshot base)
	c2_ms=$(ms_since "$t0")
	rnd='head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"'
	r1=$("$R" exec "$c1" -- sh -c "$rnd" 2>&1)
	r2=$("$R" exec "$c2" -- sh -c "$rnd" 2>&1)
	h1=$("$R" exec "$c1" -- hostname 2>&1)
	h2=$("$R" exec "$c2" -- hostname 2>&1)
	f1=$("$R" exec "$c1" -- cat /work/notes/t.txt 2>&1)
	f2=$("$R" exec "$c2" -- cat /work/notes/t.txt 2>&1)
	g=$("$R" exec "$c1" -- date +%s 2>&1)
	l=$(date +%s)
	skew=$((g > l ? g - l : l - g))
	if [ -n "$c1" ] && [ -n "$c2" ] && [ "${#r1}" = 64 ] && [ "${#r2}" = 64 ] && [ "$r1" != "$r2" ] &&
		[ -n "$h1" ] && [ "$h1" != "$h2" ] && [ "$f1" = "from the template" ] &&
		[ "$f2" = "from the template" ] && [ "$skew" -le 2 ]; then
		pass rung-snapclone-clones-vm "clones to agent-ready (acquire) ${c1_ms} and ${c2_ms} ms vs the source's cold boot (acquire) ${boot_ms} ms in this run: $(awk -v a="$c1_ms" -v b="$c2_ms" -v c="$boot_ms" 'BEGIN { printf "%.2fx, %.2fx", a / c, b / c }'); urandom $(echo "$r1" | cut -c1-16).. vs $(echo "$r2" | cut -c1-16)..; hostnames $h1 / $h2; both see the template's file; clock skew ${skew} s; the first clone's steps (ms): $(sc_trace "$sc/trace-c1")"
	else
		fail rung-snapclone-clones-vm "c1=$c1 c2=$c2 r1=$r1 r2=$r2 h1=$h1 h2=$h2 f1='$f1' f2='$f2' skew=$skew g=$g: $(sc_err c1) $(sc_err c2)"
	fi
	bad=$(sc_acq big --from-snapshot base --memory 512M)
	if [ -z "$bad" ] && grep -q "limits.memory" "$sc/big.err"; then
		pass rung-snapclone-mismatch-vm "$(sc_err big)"
	else
		fail rung-snapclone-mismatch-vm "id=$bad: $(sc_err big)"
	fi
	# the host side restarted: every supervisor killed (by pid), then a new clone
	for id in "$src" "$c1" "$c2"; do
		p=$("$R" inspect "$id" 2>/dev/null | grep -o '"supervisor_pid": [0-9]*' | grep -o '[0-9]*$')
		[ -n "$p" ] && [ "$p" != 0 ] && kill -9 "$p"
	done
	sleep 2
	c3=$(sc_acq c3 --from-snapshot base)
	f3=$("$R" exec "$c3" -- cat /work/notes/t.txt 2>&1)
	if [ -n "$c3" ] && [ "$f3" = "from the template" ]; then
		pass rung-snapclone-restart-vm "after killing the supervisors, a clone from the template on disk"
	else
		fail rung-snapclone-restart-vm "c3=$c3 f3='$f3' $(sc_err c3)"
	fi
	"$R" dispose "$c3"
	# a corrupted template: refused, the clone never booted
	printf 'XXXXXXXX' | dd of="$tdir/vm.snap" bs=1 seek=4000 conv=notrunc 2>/dev/null
	c4=$(sc_acq c4 --from-snapshot base)
	if [ -z "$c4" ] && grep -q "restore from the snapshot" "$sc/c4.err" && ! pidof rung-vmm >/dev/null; then
		pass rung-snapclone-corrupt-vm "refused: $(sc_err c4)"
	else
		fail rung-snapclone-corrupt-vm "c4=$c4 rung-vmm: $(pidof rung-vmm) $(sc_err c4)"
	fi
	"$R" snapshot rm base >"$sc/rm.err" 2>&1
	rc=$?
	for id in $(ls "$S/sandboxes"); do "$R" dispose "$id" >/dev/null 2>&1; done
	tleft=$(ls -A "$S/templates" | wc -l)
	sleft=$(ls "$S/sandboxes" | wc -l)
	if [ "$rc" = 0 ] && [ "$tleft" = 0 ] && [ "$sleft" = 0 ] && ! pidof rung-vmm >/dev/null; then
		pass rung-snapclone-rm-vm "snapshot rm leaves no template; every clone disposed, no rung-vmm"
	else
		fail rung-snapclone-rm-vm "rc=$rc templates left: $(ls -A "$S/templates") sandboxes left: $sleft rung-vmm: $(pidof rung-vmm) $(sc_err rm)"
	fi
}
if [ ! -x "$R" ] || [ ! -d "$P/rung/store" ]; then
	skip rung-e2e "no rung runtime in the payload"
else
	S=$W/rung-store
	rm -rf "$S" && cp -a "$P/rung/store" "$S" && chmod 0711 "$W" "$S"
	export RUNG_STATE_DIR=$S RUNG_VM_KERNEL=$G/bzImage RUNG_VM_INITRD=$G/initramfs.cpio.gz
	export RUNG_UID_REGISTRY=$W/uid-slots RUNG_VM_BOOT_TIMEOUT_MS=180000
	t0=$(now)
	out=$("$R" run --isolation vm --image rung/vmtest:py --memory 256M -- python3 -c 'print(2+2)' 2>"$W/rung-run.err")
	rc=$?
	if [ "$rc" = 0 ] && [ "$out" = 4 ]; then
		pass rung-run-vm "rung run --isolation vm --image rung/vmtest:py -- python3 -c 'print(2+2)' printed 4 in $(ms_since "$t0") ms"
	else
		fail rung-run-vm "rc=$rc out='$out' err=$(tr '\n' ' ' <"$W/rung-run.err" | cut -c1-300)"
	fi
	id=$("$R" acquire --isolation vm --image rung/vmtest:py --memory 256M --kind e2e --scope l1 --thread t --agent a 2>"$W/rung-acq.err")
	if [ -z "$id" ]; then
		fail rung-acquire-vm "$(tr '\n' ' ' <"$W/rung-acq.err" | cut -c1-300)"
	else
		echo "persist me" | "$R" write "$id" notes/a.txt
		got=$("$R" exec "$id" -- cat /work/notes/a.txt 2>&1)
		[ "$got" = "persist me" ] && pass rung-files-vm "write_file + exec cat" || fail rung-files-vm "got '$got'"
		"$R" exec "$id" -- sh -c 'mkdir -p /usr/local && echo installed > /usr/local/marker' >"$W/rung-mark.err" 2>&1
		id2=$("$R" acquire --isolation vm --image rung/vmtest:py --memory 256M --kind e2e --scope l1 --thread t --agent a 2>/dev/null)
		got=$("$R" exec "$id" -- cat /usr/local/marker 2>&1)
		[ "$id2" = "$id" ] && [ "$got" = installed ] && pass rung-warm-vm "same id, image write kept" || fail rung-warm-vm "id2=$id2 got='$got'"
		if "$R" suspend "$id" 2>"$W/rung-sus.err"; then
			st=$("$R" inspect "$id" | grep -o '"state": "[a-z]*"' | head -n 1)
			"$R" resume "$id" 2>>"$W/rung-sus.err"
			got=$("$R" exec "$id" -- cat /work/notes/a.txt 2>&1)
			case "$st" in *suspended*) [ "$got" = "persist me" ] && pass rung-suspend-vm "paused vCPUs, resumed, files intact" || fail rung-suspend-vm "after resume: '$got'" ;; *) fail rung-suspend-vm "state after suspend: $st" ;; esac
		else
			fail rung-suspend-vm "$(tr '\n' ' ' <"$W/rung-sus.err" | cut -c1-300)"
		fi
		# Suspended, then used without `rung resume`: the exec resumes it (docs/architecture.md).
		"$R" suspend "$id" 2>"$W/rung-sus2.err"
		st=$("$R" inspect "$id" | grep -o '"state": "[a-z]*"' | head -n 1)
		got=$("$R" exec "$id" -- cat /work/notes/a.txt 2>>"$W/rung-sus2.err")
		st2=$("$R" inspect "$id" | grep -o '"state": "[a-z]*"' | head -n 1)
		case "$st / $st2" in
		*suspended*/*running*) [ "$got" = "persist me" ] && pass rung-resume-on-use-vm "exec resumed it, files intact" || fail rung-resume-on-use-vm "exec while suspended: '$got' $(tr '\n' ' ' <"$W/rung-sus2.err" | cut -c1-200)" ;;
		*) fail rung-resume-on-use-vm "states: $st / $st2 $(tr '\n' ' ' <"$W/rung-sus2.err" | cut -c1-200)" ;;
		esac
		out=$(echo 'import os; print(len(os.listdir("/")) > 3)' | "$R" run-code "$id" --lang python 2>&1)
		[ "$out" = True ] && pass rung-run-code-vm "python run_code" || fail rung-run-code-vm "got '$out'"
		"$R" exec --timeout 2 "$id" -- sh -c 'sleep 60 & sleep 60' >/dev/null 2>&1
		rc=$?
		left=$("$R" exec "$id" -- sh -c 'ps | grep -c "[s]leep 60"' 2>&1)
		[ "$rc" = 124 ] && [ "$left" = 0 ] && pass rung-timeout-vm "124, nothing left" || fail rung-timeout-vm "rc=$rc left=$left"
		"$R" dispose "$id"
		# (busybox has no pgrep: pidof finds the VMM by its name)
		left=$(ls "$S/sandboxes" | wc -l)
		if pidof rung-vmm >/dev/null; then
			fail rung-dispose-vm "a rung-vmm still runs: $(pidof rung-vmm)"
		elif [ "$left" != 0 ]; then
			fail rung-dispose-vm "$left store entries left"
		else
			pass rung-dispose-vm "VMM gone, store entry gone"
		fi
	fi
	# Check suites of check_rung, run here on the vm rung (the store copy $S2).
	C=$P/rung/bin/check_rung
	S2=$W/rung-store-egress
	# ck_suite TEST SUITE WHAT [VAR=VALUE...]: run one suite; pass/fail with its summary line.
	# With VMTEST_ONLY naming rung-* tests (debugging: VMTEST_ONLY="rung rung-procs-vm"),
	# only those of the suites below run.
	only_rung() { case " ${VMTEST_ONLY:-} " in *" rung-"*) want "$1" ;; *) true ;; esac; }
	ck_suite() {
		cs_test=$1 cs_suite=$2 cs_what=$3
		shift 3
		only_rung "$cs_test" || return 0
		rm -f "$W/ck/skips.log"
		cs_t0=$(now)
		# bounded: a hang is a failure with its log, not a stage that never reports
		# a guest that never gets ready fails its test well within the test's own timeout
		timeout -s KILL 360 env "$@" CK_VERBOSITY=verbose RUNG_VM_BOOT_TIMEOUT_MS=45000 \
			RUNG_TEST_VM_STORE="$S2" RUNG_BUILD_DIR="$W/ck" \
			"$C" "$cs_suite" >"$W/$cs_suite.log" 2>&1
		cs_rc=$?
		cs_res=$(grep -E '^[0-9]+%: Checks' "$W/$cs_suite.log" | tail -n 1)
		if [ "$cs_rc" = 0 ] && ! grep -q 'skipped' "$W/$cs_suite.log" && [ -n "$cs_res" ]; then
			pass "$cs_test" "$cs_suite suite ($cs_res) in $(ms_since "$cs_t0") ms: $cs_what (L1 after it: $(grep -E 'MemAvailable|Shmem:' /proc/meminfo | tr -s ' ' | tr '\n' ' '))"
		else
			fail "$cs_test" "rc=$cs_rc $(grep -E 'Checks|:F:|:E:|skip' "$W/$cs_suite.log" | tr '\n' ' ' | cut -c1-800)"
			dmesg | grep -iE 'segfault|trap|oom|killed process|soft lockup|stall' | tail -n 5
			grep -E 'MemAvailable|Shmem:' /proc/meminfo | tr -s ' ' | tr '\n' ' '; echo
			if [ "${VMTEST_VERBOSE:-0}" = 1 ]; then cat "$W/$cs_suite.log"; else dump "$cs_suite" "$W/$cs_suite.log"; fi
		fi
	}
	if [ ! -x "$C" ]; then
		skip rung-egress-vm "no check_rung in the payload"
	else
		rm -rf "$S2" && cp -a "$P/rung/store" "$S2" && chmod 0711 "$S2"
		mkdir -p "$W/ck"
		# the suites that run the CLI (RUNG_BUILD_DIR/rung) find it there; it finds its
		# helpers beside its real path
		for b in rung rung-agent rung-image rung-probe; do
			[ -x "$P/rung/bin/$b" ] && ln -sf "$P/rung/bin/$b" "$W/ck/$b"
		done
		# The egress allowlist on the vm rung: a test internet in a netns, a guest whose
		# virtio-net frames reach it through a tap behind the netpolicy table.
		ck_suite rung-egress-vm e2e_egress_vm "allowed name reachable through the tap, everything else refused, no device without an allowlist"
		left=$(ls /sys/class/net | grep '^rg' | tr '\n' ' ')
		[ -z "$left" ] || fail rung-egress-vm-leak "a tap is left: $left"
		# The protocol-level suite of the other rungs (exec, output caps, exit codes,
		# stdin, cancel, run_code, env, cwd, files, concurrency) on the vm rung.
		ck_suite rung-protocol-vm e2e_process_exec "the process rung's protocol suite, on the vm rung" RUNG_TEST_RUNG=vm
		# The command against the guest's agent side (kill, ptrace, oom_score_adj, kernel
		# knobs; orphans of a dead handler).
		ck_suite rung-agentside-vm e2e_process_agentside "the agent side is out of the command's reach, on the vm rung" RUNG_TEST_RUNG=vm
		# Background processes, terminals and shell sessions (docs/procs.md) on the vm rung.
		ck_suite rung-procs-vm e2e_procs_basic "background processes, ptys, sessions, on the vm rung" RUNG_TEST_RUNG=vm
		# rung fork on the vm rung: the upper disk copied while the VM is paused (issue 16).
		ck_suite rung-fork-vm e2e_fork_vm "a fork boots on a copy of the upper disk; both diverge" RUNG_TEST_RUNG=vm
		# rung image commit on the vm rung: the guest's upper dir as a layer (issue 16).
		ck_suite rung-commit-vm e2e_commit_vm "a VM of the committed tag sees the change and the deletion" RUNG_TEST_RUNG=vm
		# Forwarded ports (docs/ports.md) over vsock: preview, half-close, refusals, flood, cycles, detach.
		ck_suite rung-ports-vm e2e_ports_basic "forwarded ports through the agent channel, on the vm rung" RUNG_TEST_RUNG=vm
		# File operations against a symlink battery, and stats (docs/files.md), on the vm rung.
		ck_suite rung-files-vm e2e_files_ops "fs ls/stat/rm/mkdir/mv confined, on the vm rung" RUNG_TEST_RUNG=vm
		ck_suite rung-cp-vm e2e_cp_basic "rung cp tar streams in and out, hostile tars refused, on the vm rung" RUNG_TEST_RUNG=vm
		ck_suite rung-stats-vm e2e_stats_basic "stats move with CPU, memory, disk, on the vm rung" RUNG_TEST_RUNG=vm
		# Host callbacks (docs/callbacks.md) on the vm rung.
		ck_suite rung-callbacks-vm e2e_callbacks_basic "host callbacks, on the vm rung" RUNG_TEST_RUNG=vm
	fi
	# Suspend to disk (docs/snapshots.md): the guest saved into the sandbox's store dir and its
	# rung-vmm gone; `rung resume` restores it (timed against the same sandbox's cold boot, its
	# acquire), the next exec resumes on use, the file goes once the guest runs; a corrupt file
	# is refused naming it and the sandbox is dead, not rebooted; dispose leaves nothing.
	if only_rung rung-suspend-disk-vm; then
		t0=$(now)
		id=$("$R" acquire --isolation vm --image rung/vmtest:py --memory 256M --kind disk --scope l1 --thread t --agent a 2>"$W/sd-acq.err")
		boot_ms=$(ms_since "$t0")
		snap=$S/sandboxes/$id/vm.snap
		# sd_save: suspend --to-disk; $why: empty, or why it failed
		sd_save() {
			why=
			sd_t0=$(now)
			"$R" suspend --to-disk "$id" >"$W/sd.err" 2>&1 || { why="suspend --to-disk: $(tr '\n' ' ' <"$W/sd.err" | cut -c1-300)"; return; }
			save_ms=$(ms_since "$sd_t0")
			sd_ins=$("$R" inspect "$id")
			sd_ls=$(ls -ln "$snap" 2>&1)
			snap_bytes=$(echo "$sd_ls" | awk '{print $5}')
			case "$sd_ins" in *'"state": "suspended"'*) ;; *) why="inspect: $(echo "$sd_ins" | grep -E '"state"' | tr '\n' ' ')"; return ;; esac
			case "$sd_ins" in *'"suspended_to_disk"'*) ;; *) why="inspect has no suspended_to_disk"; return ;; esac
			case "$sd_ls" in -rw-------*) ;; *) why="the file: $sd_ls"; return ;; esac
			if pidof rung-vmm >/dev/null; then why="a rung-vmm still runs: $(pidof rung-vmm)"; fi
		}
		if [ -z "$id" ]; then
			fail rung-suspend-disk-vm "acquire: $(tr '\n' ' ' <"$W/sd-acq.err" | cut -c1-300)"
		else
			echo "on disk" | "$R" write "$id" notes/d.txt
			sd_save
			[ -z "$why" ] || fail rung-suspend-disk-vm "$why"
			t0=$(now)
			"$R" resume "$id" >"$W/sd-res.err" 2>&1
			rc=$?
			resume_ms=$(ms_since "$t0")
			got=$("$R" exec "$id" -- cat /work/notes/d.txt 2>&1)
			if [ -z "$why" ] && [ "$rc" = 0 ] && [ "$got" = "on disk" ] && [ ! -e "$snap" ]; then
				pass rung-suspend-disk-vm "saved ${snap_bytes} bytes in ${save_ms} ms, rung-vmm gone; rung resume to agent-ready ${resume_ms} ms vs cold boot (acquire) ${boot_ms} ms: $(awk -v a="$resume_ms" -v b="$boot_ms" 'BEGIN { printf "%.2f", a / b }')x; files intact, file deleted"
			elif [ -z "$why" ]; then
				fail rung-suspend-disk-vm "resume rc=$rc got='$got' file: $(ls -ln "$snap" 2>&1) $(tr '\n' ' ' <"$W/sd-res.err" | cut -c1-300)"
			fi
			# resume on use: an exec, no rung resume
			sd_save
			t0=$(now)
			got=$("$R" exec "$id" -- cat /work/notes/d.txt 2>&1)
			use_ms=$(ms_since "$t0")
			st=$("$R" inspect "$id" | grep -o '"state": "[a-z]*"' | head -n 1)
			if [ -z "$why" ] && [ "$got" = "on disk" ] && [ ! -e "$snap" ] && [ "$st" = '"state": "running"' ]; then
				pass rung-suspend-disk-use-vm "exec resumed it from disk in ${use_ms} ms (exec included), files intact, file deleted"
			else
				fail rung-suspend-disk-use-vm "$why got='$got' state=$st file: $(ls -ln "$snap" 2>&1)"
			fi
			# a corrupt file: refused naming it, the sandbox dead (not rebooted)
			sd_save
			printf 'XXXXXXXX' | dd of="$snap" bs=1 seek=4000 conv=notrunc 2>/dev/null
			"$R" resume "$id" >"$W/sd-bad.err" 2>&1
			rc=$?
			st=$("$R" inspect "$id" | grep -o '"state": "[a-z]*"' | head -n 1)
			got=$("$R" exec "$id" -- cat /work/notes/d.txt 2>&1)
			if [ -z "$why" ] && [ "$rc" != 0 ] && grep -q "$snap" "$W/sd-bad.err" && [ "$st" = '"state": "dead"' ] && [ "$got" != "on disk" ] && ! pidof rung-vmm >/dev/null; then
				pass rung-suspend-disk-corrupt-vm "refused: $(tr '\n' ' ' <"$W/sd-bad.err" | cut -c1-300); then $st, exec: $(echo "$got" | cut -c1-80)"
			else
				fail rung-suspend-disk-corrupt-vm "$why rc=$rc state=$st exec='$got' err=$(tr '\n' ' ' <"$W/sd-bad.err" | cut -c1-300)"
			fi
			"$R" dispose "$id"
			left=$(ls "$S/sandboxes" | wc -l)
			if pidof rung-vmm >/dev/null || [ "$left" != 0 ]; then
				fail rung-suspend-disk-dispose-vm "rung-vmm: $(pidof rung-vmm); store entries left: $left"
			else
				pass rung-suspend-disk-dispose-vm "VMM gone, store entry (and its snapshot) gone"
			fi
		fi
	fi
	# An egress sandbox saved to disk, resumed by `rung exec`: a musl rung cannot load
	# libnftables, so the resumed sandbox's supervisor (its network set up again) must be
	# rung-dyn's (runtime/supervisor.c); otherwise the exec leaves it dead.
	if only_rung rung-suspend-disk-egress-vm; then
		# an allowlist needs a DNS upstream for its proxy (L1 has no resolv.conf): none is asked
		RE="env RUNG_DNS_UPSTREAM=127.0.0.1 $R"
		id=$($RE acquire --isolation vm --image rung/vmtest:py --memory 256M --kind disk-egress --allow 10.9.8.7:80 --scope l1 --thread te --agent a 2>"$W/sde-acq.err")
		if [ -z "$id" ]; then
			fail rung-suspend-disk-egress-vm "acquire: $(tr '\n' ' ' <"$W/sde-acq.err" | cut -c1-300)"
		else
			echo "egress on disk" | $RE write "$id" notes/e.txt
			if ! $RE suspend --to-disk "$id" >"$W/sde.err" 2>&1; then
				fail rung-suspend-disk-egress-vm "suspend --to-disk: $(tr '\n' ' ' <"$W/sde.err" | cut -c1-300)"
			else
				got=$($RE exec "$id" -- cat /work/notes/e.txt 2>&1)
				st=$($RE inspect "$id" | grep -o '"state": "[a-z]*"' | head -n 1)
				if [ "$got" = "egress on disk" ] && [ "$st" = '"state": "running"' ]; then
					pass rung-suspend-disk-egress-vm "exec (build/rung: $(cat "$P/rung/bin/cli-libc" 2>/dev/null || echo '?')) resumed it from disk, its network set up again, files intact"
				else
					fail rung-suspend-disk-egress-vm "got='$(echo "$got" | tr '\n' ' ' | cut -c1-300)' $st"
				fi
			fi
			$RE dispose "$id" >"$W/sde-disp.err" 2>&1 || fail rung-suspend-disk-egress-vm "dispose: $(tr '\n' ' ' <"$W/sde-disp.err" | cut -c1-300)"
			left=$(ls /sys/class/net | grep '^rg' | tr '\n' ' ')
			[ -z "$left" ] || fail rung-suspend-disk-egress-vm "a network device is left: $left"
		fi
	fi
	t_rung_snapclone
	# The isolation ladder's vm column (docs/ladder.md): rung-probe's battery inside a guest,
	# every escape checked here in L1 (its host); the table printed from the --json result.
	if ! only_rung rung-ladder-vm; then
		:
	elif [ ! -x "$P/rung/bin/rung-probe" ]; then
		skip rung-ladder-vm "no rung-probe in the payload"
	else
		S3=$W/rung-store-ladder
		rm -rf "$S3" && cp -a "$P/rung/store" "$S3" && chmod 0711 "$S3"
		t0=$(now)
		timeout -s KILL 500 "$R" --state-dir "$S3" --json ladder --rungs vm --image rung/vmtest:py \
			>"$W/ladder-vm.json" 2>"$W/ladder-vm.err"
		rc=$?
		"$R" ladder --from "$W/ladder-vm.json" >"$W/ladder-vm.txt" 2>&1
		cat "$W/ladder-vm.txt"
		sum=$(grep -E '^  vm ' "$W/ladder-vm.txt")
		if [ "$rc" = 0 ] && grep -q '"available": true' "$W/ladder-vm.json"; then
			pass rung-ladder-vm "rung ladder --rungs vm in $(ms_since "$t0") ms:$sum"
		else
			fail rung-ladder-vm "rc=$rc $sum $(tr '\n' ' ' <"$W/ladder-vm.err" | cut -c1-400)"
		fi
	fi
fi
