package zarr

import (
	"encoding/json"
	"testing"
)

// Settings drops a v2 codec's "id" (its name) and keeps everything else; a codec without a
// configuration gives {}.
func TestCodecInfoSettings(t *testing.T) {
	for _, c := range []struct {
		info CodecInfo
		want string
	}{
		{CodecInfo{Name: "blosc", Config: json.RawMessage(`{"id":"blosc","clevel":5,"cname":"lz4"}`)}, `{"clevel":5,"cname":"lz4"}`},
		{CodecInfo{Name: "bytes", Config: json.RawMessage(`{"endian":"little"}`)}, `{"endian":"little"}`},
		{CodecInfo{Name: "crc32c"}, `{}`},
		{CodecInfo{Name: "odd", Config: json.RawMessage(`[1,2]`)}, `[1,2]`},
	} {
		if got := string(c.info.Settings()); got != c.want {
			t.Errorf("%s: Settings() = %s, want %s", c.info.Name, got, c.want)
		}
	}
}
