package rowconv

// kernelPath names a family of row kernels. The package picks the best the CPU has at
// start; tests force each one in turn (setPath).
type kernelPath uint8

const (
	pathGo   kernelPath = iota // the portable loops
	pathSSE2                   // amd64 baseline
	pathAVX2                   // amd64 with AVX2
	numPaths
)

func (k kernelPath) String() string {
	return [...]string{"go", "sse2", "avx2"}[k]
}

// path is the family in use.
var path = bestPath()

// setPath makes k the family in use (tests only: not safe while rows are converted)
// and returns the previous one.
func setPath(k kernelPath) kernelPath {
	old := path
	path = k
	return old
}
