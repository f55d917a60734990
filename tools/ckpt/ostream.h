/* A file written once, front to back, through two 64 MiB slabs: the caller
 * fills one while a thread writes the other with O_DIRECT where the
 * filesystem allows (whole 4096-byte blocks: the bytes of a slab past its
 * last whole block move to the front of the next), so that an export of
 * any size uses bounded memory and no page cache (on a virtual machine,
 * fresh page-cache pages cost a first touch each). Used by `ckpt export`. */
#ifndef CKPT_CLI_OSTREAM_H
#define CKPT_CLI_OSTREAM_H

#include <stddef.h>
#include <stdint.h>

#define OSTREAM_SLAB (64u << 20)

typedef struct ostream ostream;

/* Allocates the slabs and starts the writer thread. Returns 0 or -errno. */
int ostream_start(ostream **out);
/* Stops the thread and frees everything. Accepts NULL. */
void ostream_stop(ostream *s);
/* Starts writing the file open at fd (opened with O_DIRECT or not) from offset 0. */
void ostream_begin(ostream *s, int fd);
/* The room to fill next: *room bytes (> 0) at the pointer returned. */
uint8_t *ostream_room(ostream *s, size_t *room);
/* n bytes of the room are filled: hands them to the writer. */
void ostream_commit(ostream *s, size_t n);
/* Copies n bytes into the stream. */
void ostream_write(ostream *s, const void *p, size_t n);
/* Waits for everything, writes the last partial block and sets the file's
 * length to the bytes streamed. Returns 0 or the first write error. */
int ostream_end(ostream *s);

#endif
