// Package ocf is everything of ocf-data-sampler 1.0.24 in gobatch: it reads its configuration
// (the YAML file PVNet's training runs are configured with) and translates it into a gobatch
// configuration whose sources follow ocf-data-sampler's rules. It registers the YAML format
// with package config (register.go), so that a program that imports it reads such files; the
// generic packages (config, sampler) never import it.
//
// Reading follows ocf-data-sampler's load_yaml_configuration exactly: the YAML is read as
// PyYAML's SafeLoader reads it (YAML 1.1 scalars: yes/no are booleans, 1e5 is a string),
// values tagged !ENV have their ${VAR} and ${VAR:default} references replaced from the
// environment as pyaml_env does ("N/A" when a variable without a default is unset), and the
// result is validated as the pydantic model Configuration validates it: unknown keys refused
// everywhere, pydantic's lax conversions ("5" is an int, 5.0 is an int, 5.5 is not), time
// windows that are multiples of their resolution, dropout rules, NWP providers, normalisation
// constants for every channel and diff_<c> constants for accumulated channels, t0 embeddings.
// A file ocf-data-sampler refuses is refused, naming the file, the line and the key; a file it
// accepts is accepted (docs/OCF.md).
//
// [Translate] then gives the gobatch configuration, typed ([Source], whose field tags are the
// one place gobatch's keys are named; [Raw] makes of it the map a TOML file decodes to, with
// the line of every field in the YAML): the satellite as the anchor grid source, centred on
// the generation sites, each NWP provider as an nwp source, generation as a points source.
// What gobatch's sampler cannot express yet is translated as closely as it can or left out,
// and docs/OCF.md lists it; a configuration gobatch cannot run at all (no satellite) is
// refused there, with the reason.
//
// The package imports package config (the foreign-format registry, config.Foreign, and the
// translation's shape); nothing of gobatch imports it but the programs (cmd/shmloader).
package ocf
