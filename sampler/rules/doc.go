// Package rules is the seam between gobatch's generic Zarr-window job (package sampler) and the
// rule sets it can follow: where two tools cut the same examples out of the same stores
// differently (which steps a dropout fills, how a quotient's NaN and infinities are filled,
// the axis order and extra tensors of a batch, how the trainer sees it nested, which keys have
// a meaning at all), the job asks a [Rules] value, chosen once when it opens by the anchor's
// key rules.
//
// The package holds the interface, the registry of rule sets by name ([Register], [Lookup]),
// the value types the job and a rule set exchange ([Window], [Layout], [View], ...), and
// gobatch's own rule set ([Gobatch], the default). Other rule sets live with the tool they
// follow and register themselves from an init function: package ocf registers
// ocf-data-sampler 1.0.24's, so a program that imports it can run ocf's configurations. This
// package imports nothing of gobatch; the job imports it, and so does every rule set.
package rules
