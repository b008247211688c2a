package apiserver

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel SIGKILL the child when the thread
// that started it exits, so a crashed or killed test binary leaves no
// apiserver or etcd behind.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
