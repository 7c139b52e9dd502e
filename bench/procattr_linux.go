package main

import "syscall"

// childAttr makes an external server die with the bench, even if the bench
// is killed before it can stop it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
