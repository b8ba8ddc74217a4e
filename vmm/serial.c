/*
 * vmm/serial.c: a 16550A UART at 0x3f8 (IRQ 4), output only, written to a log file.
 *
 * Bounded: output is buffered and appended to the log; when the log reaches its cap it is
 * truncated and restarted with a marker line, so a guest flooding the console can neither
 * fill the disk nor hold more than one buffer of VMM memory. The vCPU that writes pays for
 * the write; the VMM thread never touches the UART.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/util.h"
#include "vmm/vmm.h"

enum { RBR_THR, IER, IIR_FCR, LCR, MCR, LSR, MSR, SCR };
#define LCR_DLAB 0x80
#define IER_RDI 0x01
#define IER_THRI 0x02
#define IIR_NO_INT 0x01
#define IIR_THRI 0x02
#define IIR_RDI 0x04
#define IIR_FIFO 0xc0
#define LSR_DR 0x01
#define LSR_THRE 0x20
#define LSR_TEMT 0x40
#define MCR_LOOP 0x10
#define FCR_ENABLE 0x01

int vmm_serial_init(struct vmm_serial *s, const char *log_path, uint64_t cap, bool timestamps,
		    vmm_irq_fn irq_fn, void *irq_ctx, struct rung_err *err)
{
	memset(s, 0, sizeof(*s));
	s->fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (s->fd < 0)
		return rung_err_sys(err, errno, "--serial-log %s", log_path);
	int r = pthread_mutex_init(&s->lock, NULL);
	if (r) {
		close(s->fd);
		return rung_err_sys(err, r, "serial: mutex");
	}
	s->cap = cap;
	s->timestamps = timestamps;
	s->at_line_start = true;
	s->t0_us = rung_now_us();
	s->lsr = LSR_THRE | LSR_TEMT;
	s->msr = 0xb0; /* DCD, DSR, CTS */
	s->irq_fn = irq_fn;
	s->irq_ctx = irq_ctx;
	return 0;
}

static void flush_locked(struct vmm_serial *s)
{
	if (!s->out_len || s->fd < 0)
		return;
	if (s->written + s->out_len > s->cap) {
		static const char mark[] = "[rung-vmm: serial log reached its cap; truncated]\n";
		if (ftruncate(s->fd, 0) == 0) {
			s->written = 0;
			if (rung_write_all(s->fd, mark, sizeof(mark) - 1) == 0)
				s->written = sizeof(mark) - 1;
		}
		if (s->written + s->out_len > s->cap) {
			s->out_len = 0; /* cannot truncate: drop rather than grow */
			return;
		}
	}
	if (rung_write_all(s->fd, s->out, s->out_len) == 0)
		s->written += s->out_len;
	s->out_len = 0;
}

void vmm_serial_flush(struct vmm_serial *s)
{
	pthread_mutex_lock(&s->lock);
	flush_locked(s);
	pthread_mutex_unlock(&s->lock);
}

void vmm_serial_destroy(struct vmm_serial *s)
{
	if (!s || s->fd < 0)
		return;
	vmm_serial_flush(s);
	close(s->fd);
	s->fd = -1;
	pthread_mutex_destroy(&s->lock);
}

static void put(struct vmm_serial *s, uint8_t c)
{
	if (s->out_len + 32 >= sizeof(s->out))
		flush_locked(s);
	if (s->timestamps && s->at_line_start) {
		uint64_t us = rung_now_us() - s->t0_us;
		int n = snprintf((char *)s->out + s->out_len, sizeof(s->out) - s->out_len,
				 "[%6llu.%03llu] ", (unsigned long long)(us / 1000000),
				 (unsigned long long)(us / 1000 % 1000));
		if (n > 0)
			s->out_len += (size_t)n;
	}
	s->out[s->out_len++] = c;
	s->at_line_start = c == '\n';
	if (c == '\n' || s->out_len + 32 >= sizeof(s->out))
		flush_locked(s);
}

static uint8_t iir(const struct vmm_serial *s)
{
	if ((s->ier & IER_RDI) && (s->lsr & LSR_DR))
		return IIR_RDI;
	if ((s->ier & IER_THRI) && s->thri_pending)
		return IIR_THRI;
	return IIR_NO_INT;
}

static void update_irq(struct vmm_serial *s)
{
	int level = iir(s) != IIR_NO_INT;
	if (level != s->irq_level) {
		s->irq_level = level;
		if (s->irq_fn)
			s->irq_fn(s->irq_ctx, VMM_SERIAL_IRQ, level);
	}
}

uint8_t vmm_serial_in(struct vmm_serial *s, unsigned off)
{
	uint8_t v = 0;
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case RBR_THR:
		v = (s->lcr & LCR_DLAB) ? s->dll : 0;
		break;
	case IER:
		v = (s->lcr & LCR_DLAB) ? s->dlm : s->ier;
		break;
	case IIR_FCR:
		v = iir(s) | ((s->fcr & FCR_ENABLE) ? IIR_FIFO : 0);
		if (iir(s) == IIR_THRI)
			s->thri_pending = false; /* reading IIR clears a THRE interrupt */
		break;
	case LCR:
		v = s->lcr;
		break;
	case MCR:
		v = s->mcr;
		break;
	case LSR:
		v = s->lsr;
		break;
	case MSR:
		if (s->mcr & MCR_LOOP) /* loopback: DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD */
			v = (uint8_t)(((s->mcr & 0x01) << 5) | ((s->mcr & 0x02) << 3) |
				      ((s->mcr & 0x04) << 4) | ((s->mcr & 0x08) << 4));
		else
			v = s->msr;
		break;
	case SCR:
		v = s->scr;
		break;
	}
	update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return v;
}

void vmm_serial_out(struct vmm_serial *s, unsigned off, uint8_t v)
{
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case RBR_THR:
		if (s->lcr & LCR_DLAB) {
			s->dll = v;
		} else {
			if (!(s->mcr & MCR_LOOP))
				put(s, v);
			s->thri_pending = true; /* transmitted at once: THR empty again */
		}
		break;
	case IER:
		if (s->lcr & LCR_DLAB) {
			s->dlm = v;
		} else {
			if (!(s->ier & IER_THRI) && (v & IER_THRI))
				s->thri_pending = true;
			s->ier = v & 0x0f;
		}
		break;
	case IIR_FCR:
		s->fcr = v;
		break;
	case LCR:
		s->lcr = v;
		break;
	case MCR:
		s->mcr = v & 0x1f;
		break;
	case SCR:
		s->scr = v;
		break;
	default:
		break; /* LSR, MSR: read-only */
	}
	update_irq(s);
	pthread_mutex_unlock(&s->lock);
}
