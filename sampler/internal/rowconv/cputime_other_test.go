//go:build !linux

package rowconv

// threadCPU is 0 where the thread's CPU time is not read (the cpu-ns metric reads 0).
func threadCPU() int64 { return 0 }
