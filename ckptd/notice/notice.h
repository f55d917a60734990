/*
 * notice.h — preemption-notice pollers of the ckptd agent (README.md).
 *
 * A spot or preemptible VM is told 30 s to 2 min ahead that it will go. One
 * poller thread asks each configured source every interval_ms:
 *   AWS    IMDSv2: PUT /latest/api/token, then
 *          GET /latest/meta-data/spot/instance-action (404: none)
 *   GCP    GET /computeMetadata/v1/instance/preempted ("TRUE" / "FALSE")
 *   Azure  GET /metadata/scheduledevents?api-version=2020-07-01 (a Preempt
 *          event for this VM)
 *   file   a trigger file appearing (operators, tests)
 * and calls fn once per new notice. The parsers are pure functions of the
 * bytes received, exported for the tests and the fuzz target.
 *
 * Caveats
 *  - Threads: ckptd_notice_start makes one thread, with every signal
 *    blocked; fn runs on it. fn must not call ckptd_notice_stop on its own
 *    poller (deadlock) and should return quickly: while it runs, polling
 *    waits. The parsers are reentrant.
 *  - libcurl's global state: ckptd_notice_start calls curl_global_init and
 *    ckptd_notice_stop the matching curl_global_cleanup (libcurl counts
 *    them). Both are thread-safe when libcurl reports CURL_VERSION_THREADSAFE
 *    (7.84 and later where atomics exist; Debian bookworm's 7.88 does), so
 *    pollers may start and stop while other threads run. With a libcurl
 *    without it, start logs a warning: call start and stop while no other
 *    thread uses libcurl (ckptd uses it nowhere else). The poller's thread
 *    never calls the global functions itself.
 *  - Signals: requests use CURLOPT_NOSIGNAL (no SIGALRM for timeouts), and
 *    the thread blocks every signal, so a SIGPIPE from a peer that closed
 *    on it stays pending there instead of ending the process.
 *  - Hostile endpoints: at most max_body bytes are read, every request ends
 *    within timeout_ms, redirects are not followed, only http and https are
 *    spoken, proxies from the environment are not used, and the base URLs
 *    must name loopback, link-local or metadata addresses (below). Whatever
 *    goes wrong is logged (at most about one line a minute per source) and
 *    the poll is retried at the next interval.
 *  - The locale is not consulted: times are parsed in the C locale's terms
 *    whatever setlocale says.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef CKPTD_NOTICE_H
#define CKPTD_NOTICE_H

#include <stddef.h>
#include <stdint.h>

#include "server/log.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	CKPTD_NOTICE_AWS = 1,
	CKPTD_NOTICE_GCP,
	CKPTD_NOTICE_AZURE,
	CKPTD_NOTICE_FILE,
};

#define CKPTD_NOTICE_DETAIL_MAX 256
#define CKPTD_NOTICE_GCP_GRACE_S 30 /* GCP's documented notice */

typedef struct ckptd_notice_event {
	int source;           /* CKPTD_NOTICE_* */
	uint64_t deadline_ns; /* CLOCK_REALTIME ns when the node goes; 0 = unknown
	                         (the caller applies a default) */
	char detail[CKPTD_NOTICE_DETAIL_MAX]; /* one printable ASCII line, formatted
	                         by us (never bytes received as they came), e.g.
	                         "aws spot instance-action terminate at 2026-11-29T13:40:00Z" */
} ckptd_notice_event;

/* Borrowed for the call of ckptd_notice_start only (it copies what it keeps).
 * Base URLs: "http://HOST[:PORT]" or "https://...", nothing after the host
 * but an optional "/". HOST must be 127.0.0.0/8, ::1, localhost,
 * 169.254.0.0/16, fe80::/10, fd00:ec2::254 (AWS's IPv6 IMDS) or
 * metadata.google.internal; anything else is refused (-EINVAL). */
typedef struct ckptd_notice_cfg {
	const char *aws_url;       /* e.g. "http://169.254.169.254"; NULL or "": off */
	const char *gcp_url;       /* e.g. "http://metadata.google.internal"; NULL or "": off */
	const char *azure_url;     /* e.g. "http://169.254.169.254"; NULL or "": off */
	const char *azure_vm_name; /* a Preempt event must list it; NULL or "": any */
	const char *trigger_file;  /* a path; NULL or "": off */
	int interval_ms;           /* poll period; <= 0: 1000 */
	int timeout_ms;            /* bound on each request; <= 0: 2000 */
	size_t max_body;           /* bytes of a response read at most; 0: 64 KiB;
	                              more than 16 MiB: 16 MiB */
} ckptd_notice_cfg;

/* Called on the poller's thread once per new notice; ev is valid during the
 * call. A source that fired stays fired: the same notice seen again is not
 * passed on, a different one is (AWS: another action or time; GCP: fires
 * once; Azure: another EventId; file: the file appearing again after it was
 * removed, or other content). */
typedef void (*ckptd_notice_fn)(void *arg, const ckptd_notice_event *ev);

typedef struct ckptd_notice_poller ckptd_notice_poller;

/* Starts one thread that polls every configured source, the first time at
 * once. log (may be NULL) and arg are borrowed until ckptd_notice_stop.
 * [out] out: stop with ckptd_notice_stop.
 * Returns 0; -EINVAL (no source configured, a URL that is not allowed, a
 * bad setting: the reason is logged); -ENOMEM; -EIO (libcurl could not be
 * initialised); -errno from pthread_create. */
int ckptd_notice_start(const ckptd_notice_cfg *cfg, const ckptd_log *log, ckptd_notice_fn fn, void *arg,
                       ckptd_notice_poller **out);

/* Stops the thread and frees the poller. Requests in flight are abandoned,
 * never waited for: it returns as soon as a callback running returns,
 * whatever the endpoints do. NULL is accepted. */
void ckptd_notice_stop(ckptd_notice_poller *p);

/* Pure parsers of what a source returned (no I/O, no logging). now_ns is
 * CLOCK_REALTIME. Return 1: a notice, ev filled; 0: no notice; negative
 * (-EINVAL): malformed, with a reason in err (always NUL-terminated when
 * errcap > 0; err may be NULL). ev is written only on 1.
 *
 * aws:     the 200 body of spot/instance-action: a JSON object with "action"
 *          one of "terminate", "stop", "hibernate" and "time" an RFC 3339
 *          UTC time (deadline). Never 0 (no notice is a 404).
 * gcp:     the body of instance/preempted: "TRUE" (deadline now + 30 s) or
 *          "FALSE" (0), surrounding white space allowed.
 * azure:   the scheduledevents document: {"Events": [...]}; a notice is an
 *          event with "EventType" "Preempt", "EventStatus" "Scheduled" or
 *          "Started", and, when vm_name is set (not NULL or ""), vm_name in
 *          its "Resources" (compared ignoring case). Deadline: "NotBefore"
 *          (RFC 1123, "Mon, 19 Sep 2016 18:29:47 GMT"), or now when it is
 *          empty (the event has started). Of several, the earliest. Other
 *          events are not looked into; a Preempt event for this VM that is
 *          malformed makes the document malformed unless another one is
 *          good.
 * trigger: the file's content: empty or white space (deadline unknown, 0),
 *          "deadline=<seconds from now>", or an RFC 3339 time. */
int ckptd_notice_parse_aws(const char *body, size_t len, uint64_t now_ns, ckptd_notice_event *ev, char *err,
                           size_t errcap);
int ckptd_notice_parse_gcp(const char *body, size_t len, uint64_t now_ns, ckptd_notice_event *ev, char *err,
                           size_t errcap);
int ckptd_notice_parse_azure(const char *body, size_t len, const char *vm_name, uint64_t now_ns,
                             ckptd_notice_event *ev, char *err, size_t errcap);
int ckptd_notice_parse_trigger(const char *body, size_t len, uint64_t now_ns, ckptd_notice_event *ev, char *err,
                               size_t errcap);

#ifdef __cplusplus
}
#endif

#endif
