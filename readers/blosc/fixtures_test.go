package blosc

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is one case of testdata/blosc{1,2}.json.gz, written by testdata/gen.py.
type fixture struct {
	Name           string         `json:"name"`
	Format         string         `json:"format"`
	Params         map[string]any `json:"params"`
	Compressed     string         `json:"compressed"`
	ExpectedZlib   string         `json:"expected_zlib"`
	ExpectedLen    int            `json:"expected_len"`
	ExpectedSHA256 string         `json:"expected_sha256"`
	Pattern        *struct {
		Kind     string `json:"kind"`
		NBytes   int    `json:"nbytes"`
		Typesize int    `json:"typesize"`
		Seed     uint64 `json:"seed"`
	} `json:"pattern"`
	Error string `json:"error"`
	// ContentUndefined marks chunks whose decoded bytes are not defined (Blosc2
	// uninitialised special chunks): only the size is checked.
	ContentUndefined bool `json:"content_undefined"`

	src, want []byte
}

func loadFixtures(t testing.TB, file string) []*fixture {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	raw, err := io.ReadAll(gz)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var doc struct {
		Cases []*fixture `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, c := range doc.Cases {
		if c.src, err = base64.StdEncoding.DecodeString(c.Compressed); err != nil {
			t.Fatalf("%s %s: %v", file, c.Name, err)
		}
		if c.Error != "" {
			continue
		}
		switch {
		case c.Pattern != nil:
			c.want = pattern(c.Pattern.Kind, c.Pattern.NBytes, c.Pattern.Typesize, c.Pattern.Seed)
		default:
			z, err := base64.StdEncoding.DecodeString(c.ExpectedZlib)
			if err != nil {
				t.Fatalf("%s %s: %v", file, c.Name, err)
			}
			zr, err := zlib.NewReader(bytes.NewReader(z))
			if err != nil {
				t.Fatalf("%s %s: %v", file, c.Name, err)
			}
			if c.want, err = io.ReadAll(zr); err != nil {
				t.Fatalf("%s %s: %v", file, c.Name, err)
			}
		}
		sum := sha256.Sum256(c.want)
		if len(c.want) != c.ExpectedLen || hex.EncodeToString(sum[:]) != c.ExpectedSHA256 {
			t.Fatalf("%s %s: regenerated expected data (%d bytes) does not match the fixture's length %d / SHA-256",
				file, c.Name, len(c.want), c.ExpectedLen)
		}
	}
	return doc.Cases
}

// pattern reproduces gen.py's pattern() for the kinds it does not store.
func pattern(kind string, nbytes, typesize int, seed uint64) []byte {
	out := make([]byte, nbytes)
	switch kind {
	case "zeros":
	case "const":
		fillPattern(out, []byte{7, 1, 250, 3, 9, 0, 4, 2})
	case "ramp":
		for p := 0; p < nbytes; p++ {
			i, j := uint64(p/typesize), p%typesize
			t := i % 400
			tri := t
			if t >= 200 {
				tri = 400 - t
			}
			h := ((i + seed) * 2654435761) & 0xFFFFFFFF
			v := 30000 + tri + (h>>28)&3
			out[p] = byte(v>>(8*(j%8))) ^ byte(17*(j/8))
		}
	default:
		panic("unknown pattern kind " + kind)
	}
	return out
}

func TestFixturesBlosc1(t *testing.T) {
	cases := loadFixtures(t, "blosc1.json.gz")
	if len(cases) < 300 {
		t.Fatalf("only %d Blosc1 fixtures", len(cases))
	}
	var d Decoder
	for _, c := range cases {
		checkFixture(t, c, Decompress, DecompressedSize)
		// The same chunk through a reused Decoder and through the Blosc2 entry point.
		checkFixture(t, c, d.Decompress, DecompressedSize)
		checkFixture(t, c, Decompress2, Decompressed2Size)
	}
}

func TestFixturesBlosc2(t *testing.T) {
	cases := loadFixtures(t, "blosc2.json.gz")
	if len(cases) < 300 {
		t.Fatalf("only %d Blosc2 fixtures", len(cases))
	}
	var d Decoder
	for _, c := range cases {
		checkFixture(t, c, Decompress2, Decompressed2Size)
		checkFixture(t, c, d.Decompress2, Decompressed2Size)
		if c.Error == "" {
			// The Blosc1 entry point must refuse Blosc2 chunks, not misread them.
			if _, err := Decompress(make([]byte, len(c.want)), c.src); err == nil {
				t.Errorf("%s: Decompress accepted a Blosc2 chunk", c.Name)
			}
		}
	}
}

func checkFixture(t *testing.T, c *fixture, dec func(dst, src []byte) (int, error), size func([]byte) (int, error)) {
	t.Helper()
	if c.Error != "" {
		_, err := dec(make([]byte, 1<<20), c.src)
		if err == nil || !strings.Contains(err.Error(), c.Error) {
			t.Errorf("%s: got error %v, want one mentioning %q", c.Name, err, c.Error)
		}
		return
	}
	n, err := size(c.src)
	if err != nil || n != len(c.want) {
		t.Errorf("%s: size = %d, %v; want %d", c.Name, n, err, len(c.want))
		return
	}
	// A destination larger than needed, pre-filled, to catch writes past nbytes.
	dst := bytes.Repeat([]byte{0xA5}, len(c.want)+17)
	n, err = dec(dst, c.src)
	if err != nil {
		t.Errorf("%s (%v): %v", c.Name, c.Params["header"], err)
		return
	}
	if c.ContentUndefined {
		if n != len(c.want) {
			t.Errorf("%s: decoded %d bytes, want %d", c.Name, n, len(c.want))
		}
		return
	}
	if n != len(c.want) || !bytes.Equal(dst[:n], c.want) {
		t.Errorf("%s (%v): decoded %d bytes, differ from expected %d bytes at %d", c.Name, c.Params["header"], n, len(c.want), firstDiff(dst[:n], c.want))
	}
	if !bytes.Equal(dst[len(c.want):], bytes.Repeat([]byte{0xA5}, 17)) {
		t.Errorf("%s: wrote past the decompressed size", c.Name)
	}
	// Too small a destination is an error, not a panic.
	if len(c.want) > 0 {
		if _, err := dec(make([]byte, len(c.want)-1), c.src); err == nil {
			t.Errorf("%s: accepted a destination one byte short", c.Name)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
