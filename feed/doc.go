// Package feed is the producer engine of shmloader: what `run` and `serve` share between
// their flags and sockets (cmd/shmloader) and the libraries below (sampler makes batches,
// ring and shm hold them; sampler takes from ring only the protocol's declarations, the dtype
// table, the tensor name rule and the limits, and never makes, joins or fills a ring: feed
// joins the two).
//
//   - [Window]: the part of a rank's stream a ring carries (a start, an epoch), validated
//     once, into the ring's layout, with the batch description ([Describe], PROTOCOL.md 2.9)
//     of the stream's order, its epochs and the source's view.
//   - [Ring]: a ring this process produces into, made ([CreateNamed], [CreateInFD],
//     [CreateMemfd]) or joined ([JoinNamed], [JoinFD]) with this process's producer entry
//     registered, undone on every failure; its fault guard ([Ring.Guard], [CutError]).
//   - [Pool] and [Feed]: one pool of readers fills the rings of any number of feeds from one
//     sampler.Source. Each batch takes one way, in one of a feed's claim loops: claim the
//     slot, take one of the pool's fill permits, fill it and publish it, or abandon it with
//     the error for the consumer, under the fault guard; the feed's error is the first, by
//     one precedence.
//   - [Counters]: the source's statistics as the ring's job counters (PROTOCOL.md 2.5a),
//     which each feed publishes.
//
// Policy stays with the caller: when to stop (signals, the parent, a consumer that has read
// everything), exit codes, logging, and what a rank's death does to the others.
package feed
