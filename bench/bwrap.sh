# Sourced by bench/spine.sh, bench/cpu.sh and bench/ab-run.sh (from the repository root), and
# read by bench/follow.py (the BWRAP="$(command -v bwrap) ..." line as it is): the
# peer of the cold-start targets, bubblewrap with the namespaces `rung run` makes, /usr
# read-only and /bin/true run; BWRAP is its command line, bwrap's absolute path first.
# (bench/serve.py and bench/pool.c build the same command line in their own languages.)
BWRAP="$(command -v bwrap) --unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --unshare-cgroup --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin --proc /proc --dev /dev --tmpfs /tmp /bin/true"
