/* tests/lib/egress.c: see tests/lib/egress.h (no suite here). */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest.h"
#include "runtime/rt-internal.h"
#include "tests/lib/egress.h"
#include "tests/lib/testutil.h"

bool eg_world_up(struct np_world *w, char *why, size_t n)
{
	if (geteuid() != 0) {
		snprintf(why, n, "needs root (CI runs as root)");
		return false;
	}
	if (access("/usr/bin/python3", X_OK) < 0) {
		snprintf(why, n, "no /usr/bin/python3 for the in-sandbox probes");
		return false;
	}
	eg_world_start(w);
	return true;
}

void eg_world_start(struct np_world *w)
{
	/* A test that cannot build its own internet has a broken host, not a missing facility. */
	ck_assert_msg(npw_up(w) == 0, "could not bring the test world up");
	char pool[32];
	snprintf(pool, sizeof(pool), "10.214.%d.0/24", (int)(getpid() % 250));
	setenv("RUNG_DNS_UPSTREAM", w->upstream, 1);
	setenv("RUNG_NET_POOL", pool, 1);
}

void eg_spec(struct rung_spec *s, const char *kind, const char *const *allow)
{
	rung_spec_init(s);
	s->kind = strdup(kind);
	s->ttl_s = 600;
	size_t n = 0;
	while (allow && allow[n])
		n++;
	if (!n)
		return;
	s->egress_allow = calloc(n + 1, sizeof(char *));
	ck_assert_ptr_nonnull(s->egress_allow);
	for (size_t i = 0; i < n; i++)
		s->egress_allow[i] = strdup(allow[i]);
}

/*
 * One line per probe: "<probe> => <result> <ms>ms". Results: "ok <banner>", "refused"
 * (ECONNREFUSED: a TCP reset), "unreach" (EHOSTUNREACH: ICMP admin-prohibited),
 * "netunreach", "timeout", "rcode=N ip=A,B", "gaierror", ...
 */
const char eg_probe_py[] =
    "import socket,sys,time,struct,errno,os\n"
    "E={errno.ECONNREFUSED:'refused',errno.EHOSTUNREACH:'unreach',"
    "errno.ENETUNREACH:'netunreach',errno.ETIMEDOUT:'timeout',errno.EACCES:'eacces',"
    "errno.EPERM:'eperm',errno.EADDRNOTAVAIL:'addrnotavail',errno.EAFNOSUPPORT:'afnosupport'}\n"
    "def err(x):\n"
    "  if isinstance(x,socket.timeout): return 'timeout'\n"
    "  if isinstance(x,OSError) and x.errno: return E.get(x.errno,'errno%d'%x.errno)\n"
    "  return 'error:'+type(x).__name__\n"
    "def ns():\n"
    "  for l in open('/etc/resolv.conf'):\n"
    "    p=l.split()\n"
    "    if len(p)>1 and p[0]=='nameserver': return p[1]\n"
    "  raise OSError(errno.ENOENT,'no nameserver')\n"
    "def tcp(ip,port):\n"
    "  s=socket.socket();s.settimeout(3);s.connect((ip,int(port)));b=s.recv(64);s.close()\n"
    "  return 'ok '+b.decode(errors='replace').strip()\n"
    "def udp(ip,port):\n"
    "  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3)\n"
    "  s.connect((ip,int(port)));s.send(b'echo');return 'ok' if s.recv(64)==b'echo' else 'bad'\n"
    "def q(name):\n"
    "  h=struct.pack('>HHHHHH',os.getpid()&0xffff,0x0100,1,0,0,0)\n"
    "  return h+b''.join(bytes([len(l)])+l.encode() for l in name.split('.'))+b'\\0'"
    "+struct.pack('>HH',1,1)\n"
    "def ans(m):\n"
    "  rc=m[3]&15;an=struct.unpack('>H',m[6:8])[0];i=12\n"
    "  while m[i]: i+=m[i]+1\n"
    "  i+=5;ips=[]\n"
    "  for _ in range(an):\n"
    "    if m[i]&0xc0==0xc0: i+=2\n"
    "    else:\n"
    "      while m[i]: i+=m[i]+1\n"
    "      i+=1\n"
    "    t,c,ttl,l=struct.unpack('>HHIH',m[i:i+10]);i+=10\n"
    "    if t==1 and l==4: ips.append(socket.inet_ntoa(m[i:i+4]))\n"
    "    i+=l\n"
    "  return 'rcode=%d ip=%s'%(rc,','.join(ips) or '-')\n"
    "def dns(name,server=None):\n"
    "  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.settimeout(3)\n"
    "  s.connect((server or ns(),53));s.send(q(name));return ans(s.recv(1500))\n"
    "def dnstcp(name,server=None):\n"
    "  s=socket.socket();s.settimeout(3);s.connect((server or ns(),53));m=q(name)\n"
    "  s.sendall(struct.pack('>H',len(m))+m);l=struct.unpack('>H',s.recv(2))[0];b=b''\n"
    "  while len(b)<l: b+=s.recv(l-len(b))\n"
    "  return ans(b)\n"
    "def gai(name):\n"
    "  try: return 'ip='+','.join(sorted(set(a[4][0] for a in "
    "socket.getaddrinfo(name,80,socket.AF_INET,socket.SOCK_STREAM))))\n"
    "  except socket.gaierror: return 'gaierror'\n"
    "def tcp6(ip,port):\n"
    "  s=socket.socket(socket.AF_INET6);s.settimeout(3);s.connect((ip,int(port)));return 'ok'\n"
    "def addr6():\n"
    "  return ','.join(sorted(set(l.split()[5] for l in open('/proc/net/if_inet6')))) or '-'\n"
    "def ifaces(): return ','.join(sorted(n for i,n in socket.if_nameindex()))\n"
    "def sysctl(p): return open('/proc/sys/'+p).read().strip()\n"
    "def icmp(ip):\n"
    "  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM,socket.IPPROTO_ICMP);s.settimeout(3)\n"
    "  s.sendto(struct.pack('>BBHHH',8,0,0,0,1),(ip,0));s.recv(64);return 'ok'\n"
    "for c in sys.argv[1:]:\n"
    "  a=c.split();t=time.monotonic()\n"
    "  try: r=globals()[a[0]](*a[1:])\n"
    "  except Exception as x: r=err(x)\n"
    "  print('%s => %s %dms'%(c,r,int((time.monotonic()-t)*1000)),flush=True)\n";

char *eg_py(struct rung_sandbox *sb, const char *const *cmds)
{
	const char *argv[64] = {"/usr/bin/python3", "-c", eg_probe_py};
	size_t n = 3;
	for (size_t i = 0; cmds[i] && n < 63; i++)
		argv[n++] = cmds[i];
	argv[n] = NULL;
	struct rung_exec_req req = {.argv = argv, .timeout_ms = 60000};
	struct rung_exec_res res;
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(sb, &req, &res, &err) == 0, "probe exec: %s", err.msg);
	ck_assert_msg(res.exit_code == 0, "probe exited %d (signal %d): %s", res.exit_code,
		      res.signal, res.errout ? res.errout : "");
	char *out = res.out ? res.out : strdup("");
	res.out = NULL;
	if (getenv("EG_VERBOSE"))
		fprintf(stderr, "%s", out);
	rung_exec_res_release(&res);
	return out;
}

const char *eg_res(const char *out, const char *probe, char *buf, size_t len, int *ms)
{
	char key[300];
	snprintf(key, sizeof(key), "%s => ", probe);
	for (const char *l = out; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t ll = nl ? (size_t)(nl - l) : strlen(l);
		if (!strncmp(l, key, strlen(key))) {
			const char *v = l + strlen(key);
			size_t vl = ll - strlen(key);
			const char *sp = memrchr(v, ' ', vl); /* " <ms>ms" */
			size_t rl = sp ? (size_t)(sp - v) : vl;
			snprintf(buf, len, "%.*s", (int)rl, v);
			if (ms)
				*ms = sp ? atoi(sp + 1) : -1;
			return buf;
		}
		l = nl ? nl + 1 : NULL;
	}
	ck_abort_msg("no result for probe \"%s\" in:\n%s", probe, out);
	return NULL;
}

void eg_expect(const char *out, const char *probe, const char *want, int max_ms)
{
	char buf[512];
	int ms = -1;
	eg_res(out, probe, buf, sizeof(buf), &ms);
	ck_assert_msg(!strncmp(buf, want, strlen(want)), "probe \"%s\": got \"%s\", want \"%s\"",
		      probe, buf, want);
	if (max_ms > 0)
		ck_assert_msg(ms >= 0 && ms < max_ms, "probe \"%s\" (%s) took %d ms, want < %d ms",
			      probe, buf, ms, max_ms);
}

void eg_names(const char *state, const char *id, char veth[16], char table[32], char hash[13])
{
	/* runtime/net.c: netpolicy knows the sandbox by sha256("rung-net-v1:<dev>:<ino>:<id>")
	 * of its store; netpolicy/lease.c: the names are 12 hex of sha256 of that. */
	struct stat st;
	ck_assert_msg(stat(state, &st) == 0, "stat %s", state);
	char key[256], nid[RUNG_SHA256_HEX_LEN + 1], h[RUNG_SHA256_HEX_LEN + 1];
	snprintf(key, sizeof(key), "rung-net-v1:%lx:%lx:%s", (unsigned long)st.st_dev,
		 (unsigned long)st.st_ino, id);
	rung_sha256_hex(key, strlen(key), nid);
	nid[32] = '\0';
	rung_sha256_hex(nid, strlen(nid), h);
	snprintf(veth, 16, "rg%.12s", h);
	snprintf(table, 32, "rung_%.12s", h);
	if (hash)
		snprintf(hash, 13, "%.12s", h);
}

bool eg_link_exists(const char *name) { return if_nametoindex(name) != 0; }

static int nft_cmd(const char *cmd, bool terse, char **out)
{
	struct nft_ctx *n = nft_ctx_new(NFT_CTX_DEFAULT);
	ck_assert_ptr_nonnull(n);
	nft_ctx_buffer_output(n);
	nft_ctx_buffer_error(n);
	if (terse)
		nft_ctx_output_set_flags(n, NFT_CTX_OUTPUT_TERSE);
	int r = nft_run_cmd_from_buffer(n, cmd);
	if (out) {
		const char *o = nft_ctx_get_output_buffer(n);
		*out = strdup(o ? o : "");
	}
	nft_ctx_free(n);
	return r;
}

bool eg_table_exists(const char *table)
{
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "list table inet %s", table);
	return nft_cmd(cmd, true, NULL) == 0;
}

char *eg_table_text(const char *table, bool terse)
{
	char cmd[96], *out = NULL;
	snprintf(cmd, sizeof(cmd), "list table inet %s", table);
	ck_assert_msg(nft_cmd(cmd, terse, &out) == 0, "nft: no table inet %s", table);
	return out;
}

char *eg_table_text_all(void)
{
	char *out = NULL;
	ck_assert_msg(nft_cmd("list ruleset", true, &out) == 0, "nft: list ruleset failed");
	return out;
}

int eg_store_tables(const char *state)
{
	char real[PATH_MAX], h[RUNG_SHA256_HEX_LEN + 1], tag[32];
	ck_assert_ptr_nonnull(realpath(state, real));
	rung_sha256_hex(real, strlen(real), h);
	snprintf(tag, sizeof(tag), "rung-np:%.12s:", h); /* netpolicy/lease.c */
	char *all = eg_table_text_all();
	int n = 0;
	for (const char *p = all; (p = strstr(p, tag)); p++)
		n++;
	free(all);
	return n;
}

bool eg_lease_exists(const char *state, const char *id)
{
	/* <state>/net/leases/<hash> (or "<hash>-<slot>", the netpol branch's layout) */
	char v[16], t[32], h[13], p[4200];
	eg_names(state, id, v, t, h);
	snprintf(p, sizeof(p), "%s/net/leases", state);
	DIR *d = opendir(p);
	if (!d)
		return false;
	bool found = false;
	struct dirent *de;
	while (!found && (de = readdir(d)))
		found = !strncmp(de->d_name, h, 12) && (!de->d_name[12] || de->d_name[12] == '-');
	closedir(d);
	return found;
}

int eg_lease_count(const char *state)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/net/leases", state);
	DIR *d = opendir(p);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && !strchr(de->d_name, '.'))
			n++;
	closedir(d);
	return n;
}

void eg_assert_net(const char *state, const char *id, bool want)
{
	char v[16], t[32];
	eg_names(state, id, v, t, NULL);
	ck_assert_msg(eg_link_exists(v) == want, "veth %s of %s: %s", v, id,
		      want ? "missing" : "still there");
	ck_assert_msg(eg_table_exists(t) == want, "table inet %s of %s: %s", t, id,
		      want ? "missing" : "still there");
	ck_assert_msg(eg_lease_exists(state, id) == want, "lease of %s: %s", id,
		      want ? "missing" : "still there");
}

void eg_dispose(struct rung_router *r, struct rung_sandbox *sb, const char *state)
{
	char id[80];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	rung_sandbox_close(sb);
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, id, NULL, &err) == 0, "dispose %s: %s", id, err.msg);
	eg_assert_net(state, id, false);
}

pid_t eg_init_pid(struct rung_router *r, const char *id)
{
	struct rt_meta m;
	struct rung_err err = {0};
	ck_assert_msg(rt_store_meta_read(&r->store, id, &m, &err) == 0, "%s", err.msg);
	pid_t p = m.init_pid;
	rt_meta_release(&m);
	ck_assert_int_gt(p, 0);
	return p;
}

struct ping_arg {
	const char *ip;
};

static int ping_fn(void *p)
{
	struct ping_arg *a = p;
	return npw_ping(a->ip, 2000);
}

int eg_ping_from(pid_t init_pid, const char *ip)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)init_pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "open %s", p);
	struct ping_arg a = {ip};
	int r = npw_in_netns(fd, ping_fn, &a);
	close(fd);
	return r;
}

int eg_pod_netns(const struct np_world *w, const char *veth)
{
	int fd = npw_netns_new();
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(npw_ip(w->inet_fd, "link add %s type veth peer name eth0 netns "
				"/proc/%d/fd/%d", veth, (int)getpid(), fd), 0);
	ck_assert_int_eq(npw_ip(w->inet_fd, "addr add 10.250.0.1/30 dev %s", veth), 0);
	ck_assert_int_eq(npw_ip(w->inet_fd, "link set %s up", veth), 0);
	ck_assert_int_eq(npw_ip(fd, "link set lo up"), 0);
	ck_assert_int_eq(npw_ip(fd, "link set eth0 up"), 0);
	ck_assert_int_eq(npw_ip(fd, "addr add 10.250.0.2/30 dev eth0"), 0);
	ck_assert_int_eq(npw_ip(fd, "route add default via 10.250.0.1"), 0);
	return fd;
}

bool eg_gone(pid_t pid)
{
	char p[64], buf[512] = "";
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	char *rp = n > 0 ? strrchr(buf, ')') : NULL;
	return !rp || rp[2] == 'Z' || rp[2] == 'X';
}

int eg_netns_procs(int netns_fd)
{
	struct stat ns, st;
	ck_assert_int_eq(fstat(netns_fd, &ns), 0);
	DIR *d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	for (struct dirent *de; (de = readdir(d));) {
		char p[300];
		pid_t pid = atoi(de->d_name);
		snprintf(p, sizeof(p), "/proc/%s/ns/net", de->d_name);
		if (pid > 0 && stat(p, &st) == 0 && st.st_ino == ns.st_ino &&
		    st.st_dev == ns.st_dev && !eg_gone(pid))
			n++;
	}
	closedir(d);
	return n;
}
