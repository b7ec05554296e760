package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/ctibridge/ctibridge/auth"
)

// runPasswd is `ctibridge passwd`: it prints a bcrypt hash for the users
// file's password_hash. From a terminal it asks twice without echo;
// otherwise it reads one line (`echo secret | ctibridge passwd`).
func runPasswd(stdin io.Reader, stdout, stderr io.Writer) error {
	var pw string
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		ask := func(prompt string) (string, error) {
			fmt.Fprint(stderr, prompt)
			b, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(stderr)
			return string(b), err
		}
		first, err := ask("Password: ")
		if err != nil {
			return fmt.Errorf("passwd: %w", err)
		}
		again, err := ask("Again: ")
		if err != nil {
			return fmt.Errorf("passwd: %w", err)
		}
		if first != again {
			return errors.New("passwd: the passwords differ")
		}
		pw = first
	} else {
		line, err := bufio.NewReaderSize(stdin, 256).ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			if errors.Is(err, io.EOF) {
				return errors.New("passwd: no password on standard input")
			}
			return fmt.Errorf("passwd: %w", err)
		}
		pw = strings.TrimRight(line, "\r\n")
	}
	h, err := auth.HashPassword(pw, 0)
	if err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	_, err = fmt.Fprintln(stdout, h)
	return err
}
