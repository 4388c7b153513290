package encrypt

import (
	"io"

	"github.com/getsops/sops/v3/logging"
)

// SilenceLibraryLogs stops sops' own loggers (logrus, straight to stderr, past the
// operator's structured log) from writing anything. At their default level sops logs, with
// its text, a comment it cannot decrypt inside an encrypted section of a file: a note a
// person left there in plaintext, possibly a secret. What the operator needs from sops
// comes back as errors, which it words itself. Call it once at start, before sops is used.
func SilenceLibraryLogs() {
	for _, l := range logging.Loggers {
		l.SetOutput(io.Discard)
	}
}
