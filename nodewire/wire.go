package nodewire

import (
	"encoding/json"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// MaxMessage bounds one message either way.
const MaxMessage = 4096

// Request asks for rank's ring. Start and Epoch are `shmloader run`'s --start and --epoch.
type Request struct {
	Rank         *uint64 `json:"rank"`
	WorldSize    uint64  `json:"world_size"`
	Start        *uint64 `json:"start"`
	Epoch        *uint64 `json:"epoch"`
	ConfigSHA256 string  `json:"config_sha256"`
	// Batch and DataRoot: the rank's batch options (config.Overrides' flags) and data root,
	// which with the file make its stream; a node loader refuses a rank whose differ from its own.
	Batch    []string `json:"batch"`
	DataRoot string   `json:"data_root"`
	PID      int      `json:"pid"`
	Auth     string   `json:"auth,omitempty"` // the rank's proof of the node's secret ([Auth]); its first request needs it
	// Join: the message carries the rank's ring (a memfd) that a node loader before this one
	// fed and died on; this one joins it as its producer instead of making a new ring, and
	// the reply carries no descriptor.
	Join bool `json:"join,omitempty"`
	FD   int  `json:"-"` // the descriptor the message carried (-1: none)
	// Share: the job of a rank of a sharing node loader (`shmloader serve --share`), which
	// opens the job's configuration for it; nil for a node loader of one configuration.
	Share *ShareJob `json:"share,omitempty"`
}

// ShareJob says which job a rank of a sharing node loader belongs to: the ranks of one job
// send the same one, and the node loader serves each job from its own configuration and
// batch options (Request.Batch, DataRoot) over one decoded-chunk cache.
type ShareJob struct {
	// Job tells one job from the others that use the same configuration: the ranks of one
	// torchrun job derive it alike; a Loader of its own draws one.
	Job string `json:"job"`
	// Config is the configuration file, an absolute path; the node loader reads it (the
	// rank's user is the node loader's) and checks its sha256 against ConfigSHA256.
	Config string `json:"config"`
	// Cwd is the rank's working directory: what an ocf-data-sampler YAML's relative paths
	// are resolved against, as ocf-data-sampler resolves them.
	Cwd string `json:"cwd"`
}

// Reply answers a request: the ring (its memfd is the message's one descriptor), or an
// error; Usage marks an error of the request or the configuration (Python: ConfigError). A
// connection refused before its hello ([Refuse]) gets one too.
type Reply struct {
	Rank      uint64 `json:"rank"`
	Memfd     string `json:"memfd,omitempty"` // the memfd's name (/proc/PID/fd/N shows it): the Loader checks it is its rank's
	ServerPID int    `json:"server_pid"`
	Error     string `json:"error,omitempty"`
	Usage     bool   `json:"usage,omitempty"`
	Busy      bool   `json:"busy,omitempty"` // a refusal that passes (ErrBusy): try again
}

// OOBSpace is the control buffer ReadMsg needs for the one descriptor a message may carry.
var OOBSpace = unix.CmsgSpace(4)

// ReadMsg reads one message into buf, and the one descriptor it may carry into fd (-1: none;
// any others are closed). oob needs OOBSpace bytes.
func ReadMsg(c *net.UnixConn, buf, oob []byte) (n, fd int, err error) {
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || oobn == 0 {
		return n, -1, err
	}
	fd = -1
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for i := range msgs {
		fds, _ := unix.ParseUnixRights(&msgs[i])
		for _, f := range fds {
			if fd < 0 {
				fd = f
			} else {
				unix.Close(f)
			}
		}
	}
	return n, fd, nil
}

// Send writes msg as one message, carrying fd when it is >= 0.
func Send(c *net.UnixConn, msg any, fd int) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode %T: %w", msg, err)
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	_, _, err = c.WriteMsgUnix(b, oob, nil)
	return err
}
