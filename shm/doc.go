// Package shm creates, opens and maps the shared-memory segments that hold a gobatch ring
// (docs/PROTOCOL.md, section 1).
//
// A segment is a tmpfs file, either named (/dev/shm/gobatch-<NAME>, see [Create], [Open],
// [Unlink], [List]) or anonymous (a memfd, see [CreateMemfd] and [FromFD]). A creator reserves
// the whole size with fallocate(2) before anything touches the mapping, so a shared-memory
// mount that is too small fails at creation with a [*NoSpaceError] that says how much is needed,
// how much is free and how to enlarge the mount, instead of killing a process with SIGBUS later.
//
// A named segment is opened by the rules of PROTOCOL.md 1.1 ([OpenFile], [Open], [OpenAllowing]):
// never through a symlink, only a regular file of this user (or of a uid the caller allows),
// not writable by others; anything else is a [*RefusedError] naming the path and the reason, and
// "permission denied" is said as such. [Create] cannot be made to write into a file that holds
// the name already. A memfd is sealed against shrinking and growing, so it cannot be truncated
// under a mapping; a named file can, which the consumer detects (PROTOCOL.md 1.1).
//
// The package knows nothing about the ring layout; package ring interprets the bytes.
package shm
