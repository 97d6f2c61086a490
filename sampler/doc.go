// Package sampler is every batch source behind one interface: [Source] (the tensors it
// contributes, Fill a global batch into slot memory, Prefetch, Stats). [Open] turns a
// validated configuration into one [Set]: the zarr sources joined into a [Job], which builds
// the nowcasting examples of the reference workload (docs/WORKLOAD.md, nowcast-ref) from
// aligned Zarr stores, or kind = "synthetic" sources, whose values are known from their
// position (for the ring's tests and benchmarks). Sources fill global batches; [Stream] holds
// the only copy of the rank rule that maps a data-parallel rank's batch k to global batch
// k*world_size + rank.
//
// # Configuration
//
// Sources have kind = "zarr" (registered with package config by this package). Keys, in the
// vocabulary of PV forecasting configurations:
//
//	store, variable                 the store (relative to the data root; or a URL, s3://,
//	                                gs://, https://, readers/objstore) and its data array
//	                                (default: the store's only data array, the one not named
//	                                as a dimension or in a CF coordinates attribute); store
//	                                may be a list of stores read as one along time (concat.go)
//	label                           the name a rule set's view presents the source under
//	                                (default: its name), for a name its tensors cannot carry
//	variables_as_channels           true: the store holds one data array per channel (GFS's
//	                                layout), read as one array with a channel dimension
//	                                named by them (stacked.go); no variable then
//	role                            "grid" (output [T, C, H, W]; default), "nwp" ([S, C, H, W])
//	                                or "points" ([T, K]); see Dimensions below
//	dims                            a table from a canonical axis to the store's dimension name,
//	                                for names the accepted spellings miss:
//	                                dims = { y = "northing", x = "easting" }
//	anchor = true                   one source: t0 is drawn from its times; a grid's
//	                                locations are drawn from its grid (or are the sites of
//	                                its locations key, placed on it); a points source's are
//	                                its own systems, every grid and NWP source then cropped
//	                                around each in its own system (sitecrop.go): a
//	                                configuration without a grid to centre on (NWP-only)
//	time_resolution_minutes, interval_start_minutes, interval_end_minutes
//	                                the window relative to t0 (both ends included)
//	image_size_pixels_height/_width grid and nwp crops
//	channels                        grid and nwp: selection by name; required when the store
//	                                has a channel axis, absent when it has none (one channel)
//	min_staleness_minutes           nwp: the latest run with init_time <= t0 - this
//	max_staleness_minutes           nwp: and t0 - init_time <= this (0: no limit); an older
//	                                run within it when the latest lacks a step of the window.
//	                                A rule set's per-target window has its own staleness
//	                                (nwptargets.go)
//	accum_channels                  nwp, with a rule set's per-target window only: channels
//	                                accumulated over a run, differenced along the steps before
//	                                their normalisation (nwptargets.go)
//	nearest_k, ids_tensor           points: the k systems nearest the centre; their ids go
//	                                to the int64 tensor ids_tensor (default <name>_system)
//	nan_policy                      "keep" (default) or "zero"
//	nan_fill                        instead of nan_policy: NaN becomes this value after the
//	                                normalisation (a dropout_value)
//	normalise_mean, normalise_std   per channel (points: one value): (v - mean) / std
//	normalise_clip_min, normalise_clip_max
//	                                per channel, with normalise_mean: the value is clipped to
//	                                [min, max] first (inf: no bound)
//	dropout_timedeltas_minutes, dropout_fraction
//	                                with probability fraction (split evenly across the
//	                                timedeltas), or with a list of one probability per
//	                                timedelta, values after t0 + one of the (non-positive)
//	                                timedeltas become NaN (grid, points; which of them is the
//	                                rule set's: rules.Rules.DropoutFills); on an NWP with a
//	                                per-target window the timedelta moves the latest init time
//	                                the example may use (gobatch's rules refuse NWP dropout)
//	fetch_depth, fetch_buffer_mb    chunk reads in flight at once (default: 8 for a store in
//	                                object storage, one per core for a local one) and the memory
//	                                they may hold (default 256 MB); see fetch.go
//	fetch_ahead_batches             anchor only: each Fill also prefetches the batch this many
//	                                further in the rank's stream, in the background (default 4
//	                                when a store is in object storage, else 0); see ahead.go
//	rules                           anchor only: the rule set the whole job follows where rule
//	                                sets differ, by name: "gobatch" (default) or one a program
//	                                registers (package rules): dropout, quotient fill, crops
//	                                around each site in every source's own system
//	                                (sitecrop.go), per-target NWP windows (nwptargets.go),
//	                                its own (t0, location) pairs (pairs.go), the layout and
//	                                extra tensors (xylayout.go), the view
//	cache_mb, sampling, segment_steps, resident_segments, rotate_every_batches
//	                                anchor only: the cache budget and the sampling mode
//	anchor_coords = ["x_osgb", "y_osgb"]
//	                                not the anchor: two arrays of the anchor's store (x then
//	                                y, over the anchor's (y, x), either order, or 1-D over one
//	                                of them) giving each anchor pixel's position in this
//	                                source's coordinates
//	crs                             the source's (or the anchor's) coordinate reference system,
//	                                anything PROJ reads ("EPSG:27700", a PROJ string, WKT);
//	                                default: the anchor's data array's `area` attribute (a
//	                                pyresample area definition), EPSG:4326 for coordinates
//	                                named longitude/latitude (lon/lat), else the anchor's own
//	locations = "pv"                anchor only: centre the examples on the systems of that
//	                                points source instead of on pixels drawn from the grid
//	capacity = "cap"                points: divide the values step by step by points source
//	                                "cap" (the same store, window and nearest_k; capacity.go),
//	                                then fill NaN; adds the capacity_mwp tensor
//	datetime_features, solar_position, t0_embedding
//	                                points, the anchor's locations only: the values a PV
//	                                model's sample carries besides the data (sitefeatures.go,
//	                                package features)
//
// # Dimensions
//
// Dimensions are found by name (xarray's _ARRAY_DIMENSIONS in Zarr v2, dimension_names in v3),
// in any order. Each role has canonical axes, the order of its output and of the chunks in the
// cache: grid (time, channel, y, x), nwp (init_time, step, channel, y, x), points (time, id).
// A store dimension maps to an axis through the source's dims table, else through the accepted
// spellings (dims.go holds the one list):
//
//	time       time, time_utc, datetime_gmt
//	channel    channel, channels, variable
//	y          y, y_geostationary, y_osgb, latitude, lat
//	x          x, x_geostationary, x_osgb, longitude, lon
//	init_time  init_time, init_time_utc
//	step       step
//	id         system, location_id, gsp_id, ss_id, site_id
//
// Every store dimension must map to one axis and every axis but channel must be found; a store
// without a channel axis is one channel. Otherwise the source is refused, naming the store, the
// array, its dimensions and the names accepted. Each axis takes its values from the coordinate
// array of the same name. Chunks are transposed into canonical order once, when decoded, so a
// channel-last store costs a transposition per cache miss and nothing per example.
//
// Coordinates may be ascending or descending, integer or float. Crops keep the store's order
// along each axis: a crop of a store whose x descends has its columns in descending x, as
// xarray's isel gives them; nothing is flipped (unless the rule set's layout asks for both
// increasing: xylayout.go).
//
// Points: ids are integers, or strings holding decimal integers ('1' .. '21'), which become
// int64; other strings are refused naming the coordinate. Each system's position comes from
// the CF "coordinates" attribute of the data array (the names spelled as x and y; two unknown
// names are taken as x then y), else from 1-D coordinates over the id dimension spelled as x
// and y. Positions in longitude/latitude are placed on an anchor in another crs through PROJ,
// as grids are (align.go); a points source with no positions is refused, since nearest_k needs
// them.
//
// # Examples
//
// A [Job] is made from a validated configuration. At start-up it reads the stores' metadata
// and coordinates only; it computes the t0 candidates (below, Times) and the location range
// (centres in [h/2, H - h/2) so that the anchor crop fits). Example e of global batch g draws
// its t0 candidate and its centre pixel from a counter-based hash of (seed, g, e) (or takes
// them from the epoch's permutation, below), so the stream is a pure function of the
// configuration and the seed, whatever the number of readers, processes or their timing; rank r of world_size n produces the global
// batches k*n + r ([Stream]). The anchor crop is taken by index around the centre; other grids and NWP
// use the coordinate nearest the centre's (ties to the lower index), start = nearest - size/2,
// clamped into the grid; NWP takes the latest run old enough and the lead steps
// floor((t0 + interval_start - init_time) / resolution) onwards; points take the nearest k
// systems (ties to the lower index) in ascending id order: by euclidean distance in a
// projection, by the chord on the WGS84 ellipsoid in longitude/latitude (distance.go). The batch's
// tensors are the sources' data (float32) in configuration order, then t0 (int64 unix
// seconds), x and y (float64, the centre pixel's coordinates), then each points source's ids,
// then location_id when site-anchored, then the site features (float32: date_sin, date_cos,
// time_sin, time_cos [B, T], solar_azimuth, solar_elevation [B, T_sol], t0_embedding [B, E]),
// then capacity_mwp (float32 [B]) with a capacity key, then for each NWP source with a
// per-target window <name>_init_time_utc and <name>_target_time_utc (float64 [B, S],
// nanoseconds since the epoch) and <name>_step (int64 [B, S], whole hours) of every step of
// its window, then the window tensors the rule set's layout asks for (xylayout.go).
//
// # Times
//
// Time coordinates are datetime64 of any unit or CF numbers ("minutes since 2021-01-01"); NWP
// steps timedelta64 or numbers with a units attribute (hours, minutes, seconds). Every time
// axis must be strictly ascending (else the store, coordinate and index are named), but it may
// have gaps and change its step: real archives miss images and runs. The t0 candidates are
// the anchor's times, within [batch] t0_start .. t0_end or any of [batch] time_periods (ISO
// 8601, both ends included; a train / validation split) when given, at which every source has every step of its window at exactly
// the expected time: grid and points t0 + interval_start .. t0 + interval_end every
// time_resolution_minutes; NWP the latest run with init_time <= t0 - min_staleness_minutes
// (and t0 - init_time <= max_staleness_minutes) whose lead steps floor((t0 + interval_start -
// init_time) / resolution) onwards all exist, else the next older run within the limits (a
// missing run is simply absent from init_time). A rule set may give NWP windows a per-target
// rule instead (nwptargets.go): each target time from a run the rule picks among those at or
// before t0 (or t0 + the example's NWP dropout timedelta), so that one window may mix runs; a
// t0 is a candidate when every target has a run and its step, with and without each dropout
// timedelta.
// A window's steps are found by arithmetic on a
// regular axis and by search on any other; one across a change of step gathers through an index
// list. [Job.Rejections] says, per source, how many anchor times it rules out, how many for
// each cause (a gap, the window leaving the coordinate, no NWP run, ...; most first) and why the
// first was (shmloader logs it at start-up with -v); a configuration with no candidate is
// refused with that report.
//
// With site-anchored examples a rule set may have its own (t0, location) pairs (pairs.go),
// found from the times of the anchor, every NWP and the locations source. Pairs that are t0
// candidates times sites are drawn as those; the others one by one (Plan.SampleSpace).
//
// # Epochs
//
// With [batch] order = "epochs" the stream is a sequence of epochs instead of independent
// draws. An epoch is a seeded permutation of the sample space (the t0 candidates; each sample
// gets its centre pixel from a hash of (seed, epoch, sample)), computed counter-based in O(1)
// memory (epochs.go). Global batch g lies in epoch g / B, where B is floor(samples / size)
// rounded down to a multiple of the world size (drop-last, [Stream.Epoch]), so rank r's
// stream batch k is in epoch k / (B / world_size) on every rank and the ranks see disjoint
// samples of each epoch. With the decoded data larger than the cache (locality sampling) the
// permutation is a block shuffle instead: a seeded order of time segments, cut into groups
// sized for two to fit in the cache, each group's samples permuted among themselves, so that
// consecutive batches share chunks; with object storage the next group is fetched while the
// current one drains (ahead.go). A rule set's own pairs numbered in time-ordered runs
// (rules.TimeOrdered: ocf's per-location pairs, each location its own t0s) are walked the same
// way, and drawn by locality sampling in stream order: a segment holds each run's pairs in its
// time span (pairblocks.go). [Set.Plan]'s mixing
// reports the segments per batch and the rank correlation of position and t0. Jobs of a shared
// cache that walk one block shuffle keep pace, within what the cache holds (pace.go).
//
// # Cache and sampling modes
//
// Chunks are decoded once into a cache (package chunks) shared by all readers: float32 at full chunk shape
// with the CF decoding (fill value to NaN, then scale and offset, in float64 as xarray does),
// the normalisation and the NaN policy applied, in memory mapped outside the Go heap within the
// budget. A gather is then a copy per output row (128 bytes for a 32-pixel crop). Before it
// gathers, a Fill decodes its batch's missing chunks on all cores (the first batch, rotations),
// a local store reading the next chunks ahead meanwhile (fetch.go), so that with a cold page
// cache the disk works while the cores decode.
// The readers' decodes share one queue served lowest batch first, so that at start-up (reader
// r fills batch r) every core works on batch 0, the one the consumer waits for, before batch 1;
// [Job.Prefetch] starts a batch's decodes ahead of its Fill (shmloader does it for the first
// batch while it creates the ring).
//
// When the decoded data is larger than about 90% of the budget, sampling "auto" switches from
// "random" to "locality": examples are drawn from a resident set of time segments that slides
// by one segment every rotate_every_batches batches, through seeded permutations of all
// segments, so that every t0 candidate keeps the same share over a pass; Stats reports the
// segments a batch mixes.
package sampler
