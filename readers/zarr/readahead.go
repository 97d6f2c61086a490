package zarr

// Read-ahead. A chunk read from a local disk whose pages are not in the page cache waits for
// the disk (milliseconds for a chunk of a few MB); a reader that decodes chunks one after
// another then alternates between waiting for the disk and decoding. ReadAhead lets it ask
// for the next chunks' bytes while it decodes the current ones: the kernel reads them in the
// background, and the FetchChunk that follows finds them in memory. It is a hint only: it
// changes no result, and does nothing where it cannot help.

// ReadAheadStore is implemented by stores that can start reading a key's value in the
// background (a local directory: posix_fadvise POSIX_FADV_WILLNEED). ReadAhead returns at
// once or after queueing the reads; it reports nothing (a missing key or a failed hint is
// found by the read that follows).
type ReadAheadStore interface {
	ReadAhead(key string)
}

// ReadAhead asks the store to start reading the stored bytes of chunk idx (grid index, as
// FetchChunk takes it) in the background. It does nothing for a store that is not a
// ReadAheadStore (memory, zip archives, object storage, whose reads have their own depth),
// for a sharded array (a shard's inner chunk is a range found through the shard's index,
// itself a read), and for an index that FetchChunk would refuse.
func (a *Array) ReadAhead(idx []int) {
	ra, ok := a.Store.(ReadAheadStore)
	if !ok || a.shard != nil || a.checkChunkRead(idx) != nil {
		return
	}
	kb := keyBufs.Get().(*keyBuf)
	defer keyBufs.Put(kb)
	ra.ReadAhead(unsafeKey(a.appendKey(kb.b[:0], idx, a.keys.sep)))
}
