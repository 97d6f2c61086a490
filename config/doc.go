// Package config reads a shmloader configuration file (TOML, or JSON of the same shape) into a
// validated [Config].
//
// The schema is described in docs/ARCHITECTURE.md:
//
//	[batch]   size (required), seed (default 0), batches (default 0 = unbounded),
//	          order ("stream", the default, or "epochs"; epochs are not cut by batches)
//	[ring]    slots (default 4)
//	[node]    on_rank_death ("stop", the default, or "continue": shmloader serve)
//	[[source]] name, kind, and the keys of that kind
//
// Each source kind validates its own keys: the common keys (name, kind) are read here, and the
// rest of the table is handed to the decoder registered for the kind with [RegisterKind]
// (package sampler registers "synthetic" and "zarr"). A decoder reads keys through a [Table], which records which keys
// were read, so that a key nobody read is reported as unknown.
//
// Every problem is reported as a [FieldError] naming the file, the line (where it can be found),
// the field ("source[1].dtype") and what was expected. [Load] returns all problems of a file at
// once as an [Errors] value.
package config
