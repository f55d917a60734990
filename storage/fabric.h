/* The peer-DRAM tier's transport: a thin wrapper over libfabric RMA on one
 * reliable-datagram (FI_EP_RDM) endpoint. A rank fi_writes its shard image
 * into a region that a partner node's agent registered, and fi_reads it
 * back. Everything provider-specific (memory-registration modes, keys,
 * address formats, progress) stays inside fabric.c.
 *
 * Two roles:
 *   passive (the agent): registers memory that peers write and read. A
 *     passive fab runs a progress thread when the provider's data progress
 *     is manual (tcp;ofi_rxm), so that RMA aimed at it completes without the
 *     agent doing anything. A passive fab never initiates a transfer.
 *   active (a rank): initiates ckpt_fab_xfer and drives progress by reading
 *     its completion queue from the calling thread; it has no thread.
 *
 * Errors: 0 or a negative errno. Where an `err, errcap` buffer is given, a
 * failure also writes a one-line reason there, including libfabric's own
 * text (fi_strerror, fi_cq_strerror).
 *
 * Threading: provider_name, mr_reg, mr_close and mr_remote may be
 * called from any thread (the domain is opened FI_THREAD_SAFE). ckpt_fab_xfer
 * on one fab runs in one thread at a time. ckpt_fab_close must not race with
 * any other call on the fab.
 *
 * Caveats:
 *   - fork: a fab does not survive fork(); the child opens its own.
 *   - After an xfer fails with anything other than -EINVAL the fab is
 *     broken: operations may still be in flight on the caller's buffer.
 *     Later xfers fail with -EPIPE; the caller must ckpt_fab_close it
 *     (closing the endpoint is what guarantees nothing touches the buffer
 *     any more) before freeing or reusing the buffer, and open a new one.
 *   - Registered memory must stay mapped until its region is closed. */
#ifndef CKPT_STORAGE_FABRIC_H
#define CKPT_STORAGE_FABRIC_H

#include <stddef.h>
#include <stdint.h>

/* Held around any change of the process's signal dispositions that may run
 * while another thread opens the first fabric (which loads libfabric and
 * puts back every disposition its libraries' constructors changed): the
 * change then comes before or after that load, never inside it. */
void ckpt_fab_signals_lock(void);
void ckpt_fab_signals_unlock(void);

typedef struct ckpt_fab ckpt_fab;       /* fabric, domain, av, cq, endpoint */
typedef struct ckpt_fab_mr ckpt_fab_mr; /* a registered memory region */

#define CKPT_FAB_ADDR_MAX 128

/* What a remote side needs to reach a registered region. Travels over
 * ckptd's control protocol as opaque bytes and two u64; it is only
 * meaningful to a fab of the same provider. */
typedef struct ckpt_fab_remote {
	uint8_t addr[CKPT_FAB_ADDR_MAX]; /* the owner's endpoint address */
	uint32_t addr_len;
	uint64_t key;                    /* the region's remote key */
	uint64_t base;                   /* remote address of the region's byte 0 */
} ckpt_fab_remote;

/* Access to a region: used as a local buffer of xfer, written remotely,
 * read remotely. */
enum { CKPT_FAB_LOCAL = 1, CKPT_FAB_REMOTE_WRITE = 2, CKPT_FAB_REMOTE_READ = 4 };

enum { CKPT_FAB_WRITE = 1, CKPT_FAB_READ = 2 };

/* Opens a fabric, domain, address vector, completion queue and endpoint.
 *   provider [in]: a libfabric provider name ("tcp;ofi_rxm", "verbs;ofi_rxm",
 *     "efa"); NULL: env CKPT_FABRIC_PROVIDER, else the first provider that
 *     fi_getinfo offers for FI_RMA on FI_EP_RDM and that opens.
 *   host [in]: the local address to bind ("127.0.0.3"); NULL: any. The port
 *     is chosen by the provider.
 *   passive [in]: 1 for the side whose memory is accessed (see the top).
 *   out [out]: the fab, freed by ckpt_fab_close.
 * Returns 0; -ENODATA when no provider matches (none installed, or the
 * named one cannot do RMA here); -ENOTSUP when the provider needs a
 * memory-registration mode this wrapper cannot honour (FI_MR_RAW,
 * FI_MR_MMU_NOTIFY); -ENOMEM; another -errno from libfabric. */
int ckpt_fab_open(const char *provider, const char *host, int passive, ckpt_fab **out,
                  char *err, size_t errcap);

/* Stops the progress thread, closes the endpoint (after which no operation
 * touches any registered or passed buffer), then closes every region still
 * registered (their handles become invalid: close regions first when you
 * still hold them), and frees f. NULL is a no-op. */
void ckpt_fab_close(ckpt_fab *f);

/* The provider's name, e.g. "tcp;ofi_rxm"; valid while f is open. */
const char *ckpt_fab_provider_name(const ckpt_fab *f);

/* Registers [buf, buf+len) with the given CKPT_FAB_* access bits. The
 * memory must be allocated and mapped (some providers pin it). Returns 0,
 * -EINVAL (len 0, no access bits) or the provider's -errno. */
int ckpt_fab_mr_reg(ckpt_fab *f, void *buf, size_t len, unsigned access, ckpt_fab_mr **out,
                    char *err, size_t errcap);

/* Deregisters and frees mr; NULL is a no-op. The caller makes sure no
 * transfer uses it any more (remote peers that still try get an error).
 * A provider that ties regions to the endpoint (FI_MR_ENDPOINT) may refuse
 * while the endpoint is open: the handle is gone all the same, and the
 * region is deregistered by ckpt_fab_close. */
void ckpt_fab_mr_close(ckpt_fab_mr *mr);

/* Fills r with what a peer needs to reach mr: our address, the key and the
 * base, so that the remote address of the region's byte `off` is
 * r->base + off. mr must belong to f. Returns 0 or -EINVAL. */
int ckpt_fab_mr_remote(ckpt_fab *f, const ckpt_fab_mr *mr, ckpt_fab_remote *r);

/* Moves len bytes between local buf and the region r describes, starting
 * at its offset roff: op CKPT_FAB_WRITE copies buf there, CKPT_FAB_READ
 * copies from there into buf. Returns when all of it completed.
 *   local [in]: the region buf lies in (registered CKPT_FAB_LOCAL), or NULL:
 *     allowed only when the provider does not need local registration
 *     (no FI_MR_LOCAL); then nothing is registered for buf, the provider
 *     handles it.
 *   piece: bytes per operation; 0 means 4 MiB; capped at the provider's
 *     max_msg_size.
 *   depth: operations in flight; 0 means 8; capped at the provider's tx
 *     queue size and CKPT_FAB_DEPTH_MAX.
 *   timeout_ms: the longest wait for any progress (a post or a completion);
 *     <= 0 means 30 s.
 * A WRITE's completion means the provider delivered the data to the peer
 * (FI_DELIVERY_COMPLETE where the provider offers it, see fabric.c).
 * Waits sleep in fi_cq_sread where the provider's CQ has a wait object
 * (tcp;ofi_rxm); otherwise (efa, shm) the calling thread polls the CQ.
 * len 0 is a no-op returning 0 (the peer is not contacted).
 * Returns 0; -EINVAL for bad arguments or a passive fab (the fab stays
 * usable); -EPIPE on a fab broken earlier; -ETIMEDOUT when nothing
 * progressed for timeout_ms; another -errno from the provider or from a
 * completion error (a bad key or an access past the region's end; a peer
 * that went away). Every error but -EINVAL breaks the fab (see Caveats). */
#define CKPT_FAB_DEPTH_MAX 64
int ckpt_fab_xfer(ckpt_fab *f, int op, ckpt_fab_mr *local, void *buf, size_t len,
                  const ckpt_fab_remote *r, uint64_t roff, size_t piece, unsigned depth,
                  int timeout_ms, char *err, size_t errcap);

/* 1 if the provider needs every local buffer of a transfer registered
 * (FI_MR_LOCAL): a NULL region is then refused. */
int ckpt_fab_needs_local_mr(const ckpt_fab *f);

/* 1 once a transfer error broke f (see Caveats): close it. */
int ckpt_fab_broken(const ckpt_fab *f);

/* ---- pipelined reads ----
 * One piece of a ckpt_fab_fetch: len bytes at roff of the remote region,
 * landing in buf (inside mr, registered CKPT_FAB_LOCAL; mr NULL only where
 * the provider needs no local registration), or, with buf NULL, in one of
 * the fetch's bounce buffers (len <= bounce_bytes). */
typedef struct ckpt_fab_piece {
	uint64_t roff;
	size_t len;
	void *buf;
	ckpt_fab_mr *mr;
} ckpt_fab_piece;

/* Called once per piece, as soon as all of it has landed: data is buf or
 * the bounce buffer (valid only during the call), len the piece's. Calls
 * for different pieces may run at once on different threads, in any order.
 * A negative return stops the fetch (nothing more is posted, what is in
 * flight is drained) and is what ckpt_fab_fetch returns. */
typedef int (*ckpt_fab_landed_fn)(void *arg, size_t i, const void *data, size_t len);

typedef struct ckpt_fab_fetch_opts {
	uint32_t size;         /* sizeof(ckpt_fab_fetch_opts): lets it grow */
	unsigned depth;        /* reads in flight; 0: 16; capped like ckpt_fab_xfer's */
	size_t op_bytes;       /* bytes per read; 0: 4 MiB; capped at max_msg_size */
	unsigned threads;      /* threads calling landed, besides the caller, which
	                          drives the fabric; 0: landed runs on the caller's
	                          thread between completions. At most 16 */
	void *const *bounce;   /* nbounce buffers of bounce_bytes each */
	ckpt_fab_mr *bounce_mr;/* the region they all lie in */
	size_t bounce_bytes;
	unsigned nbounce;
	int timeout_ms;        /* no progress for this long: -ETIMEDOUT; <= 0: 30 s */
} ckpt_fab_fetch_opts;

/* Reads n pieces of the region r describes with up to depth reads in flight
 * and hands each to landed (on the fetch's threads) while later ones are
 * still on the wire: the read of a piece and the caller's work on the one
 * before overlap. The partner-read path of restores and of an agent pulling
 * a lost node's state into its own pool. Returns 0 once every piece landed
 * and every landed call returned 0; landed's error; -EINVAL for bad
 * arguments (nothing posted, the fab stays usable); otherwise a fabric or
 * completion error, which breaks the fab as ckpt_fab_xfer's do. One fetch
 * or xfer per fab at a time. */
int ckpt_fab_fetch(ckpt_fab *f, const ckpt_fab_remote *r, const ckpt_fab_piece *pieces, size_t n,
                   const ckpt_fab_fetch_opts *o, ckpt_fab_landed_fn landed, void *arg, char *err,
                   size_t errcap);

#endif
