//go:build !unix

package command

import "os"

// diePipe ends the process with SIGPIPE's status (there is no SIGPIPE to
// raise here).
func diePipe() { os.Exit(141) }
