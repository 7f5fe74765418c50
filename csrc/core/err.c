/* err.c - see err.h. */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void ql_err_clear(ql_err *e)
{
	if (!e)
		return;
	e->errnum = 0;
	e->usage = 0;
	e->code[0] = '\0';
	e->msg[0] = '\0';
}

static void vfill(ql_err *e, int errnum, int usage, const char *code,
		  const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

static void vfill(ql_err *e, int errnum, int usage, const char *code,
		  const char *fmt, va_list ap)
{
	e->errnum = errnum;
	e->usage = usage;
	snprintf(e->code, sizeof e->code, "%s",
		 code ? code : ql_errno_name(errnum));
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
}

int ql_err_set(ql_err *e, int errnum, const char *code, const char *fmt, ...)
{
	if (errnum < 0)
		errnum = -errnum;
	if (errnum == 0)
		errnum = EIO;
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vfill(e, errnum, 0, code, fmt, ap);
		va_end(ap);
	}
	return -errnum;
}

int ql_err_usage(ql_err *e, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vfill(e, EINVAL, 1, "EINVAL", fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

const char *ql_errno_name(int errnum)
{
	if (errnum < 0)
		errnum = -errnum;
	switch (errnum) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EINTR: return "EINTR";
	case EIO: return "EIO";
	case ENXIO: return "ENXIO";
	case E2BIG: return "E2BIG";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case ENOTDIR: return "ENOTDIR";
	case EINVAL: return "EINVAL";
	case EMFILE: return "EMFILE";
	case ENFILE: return "ENFILE";
	case ENOSPC: return "ENOSPC";
	case EPIPE: return "EPIPE";
	case ERANGE: return "ERANGE";
	case ENOSYS: return "ENOSYS";
	case ENODATA: return "ENODATA";
	case EPROTO: return "EPROTO";
	case EBADMSG: return "EBADMSG";
	case EOVERFLOW: return "EOVERFLOW";
	case EMSGSIZE: return "EMSGSIZE";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case EOPNOTSUPP: return "ENOTSUP";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EADDRINUSE: return "EADDRINUSE";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case ENETDOWN: return "ENETDOWN";
	case ENETUNREACH: return "ENETUNREACH";
	case ECONNABORTED: return "ECONNABORTED";
	case ECONNRESET: return "ECONNRESET";
	case ENOBUFS: return "ENOBUFS";
	case ENOTCONN: return "ENOTCONN";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECONNREFUSED: return "ECONNREFUSED";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case EALREADY: return "EALREADY";
	case EINPROGRESS: return "EINPROGRESS";
	case ECANCELED: return "ECANCELED";
	default: return "EUNKNOWN";
	}
}
