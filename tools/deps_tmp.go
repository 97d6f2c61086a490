package tools
import (
 _ "golang.org/x/sys/unix"
 _ "github.com/edsrzf/mmap-go"
 _ "github.com/rs/zerolog"
 _ "github.com/klauspost/compress/zstd"
 _ "github.com/pierrec/lz4/v4"
 _ "github.com/BurntSushi/toml"
)

