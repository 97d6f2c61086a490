// Package shm creates, opens and maps the shared-memory segments that hold a gobatch ring
// (docs/PROTOCOL.md, section 1).
//
// A segment is a tmpfs file, either named (/dev/shm/gobatch-<NAME>, see [Create], [Open],
// [Unlink], [List]) or anonymous (a memfd, see [CreateMemfd] and [FromFD]). A creator reserves
// the whole size with fallocate(2) before anything touches the mapping, so a shared-memory
// mount that is too small fails at creation with a [*NoSpaceError] that says how much is needed,
// how much is free and how to enlarge the mount, instead of killing a process with SIGBUS later.
//
// The package knows nothing about the ring layout; package ring interprets the bytes.
package shm
