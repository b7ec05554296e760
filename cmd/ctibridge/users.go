package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/ctibridge/ctibridge/auth"
	"github.com/ctibridge/ctibridge/directory"
)

const usersUsage = `Usage:
  ctibridge users import FILE.csv --users PATH [--dry-run]
      add the CSV's users to the users file (created if missing); columns:
      username (required), name, password or password_hash, role or profile,
      endpoints, groups, permissions (lists separated by ;), cellphone
  ctibridge users list [serve's flags or --config FILE]
      list the users serve would have: the users file and the directories
`

// runUsers is `ctibridge users`.
func runUsers(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usersUsage)
		return errors.New("users: want import or list")
	}
	switch args[0] {
	case "import":
		return runUsersImport(args[1:], stdout, stderr)
	case "list":
		return runUsersList(ctx, args[1:], getenv, stdout, stderr)
	}
	fmt.Fprint(stderr, usersUsage)
	return fmt.Errorf("users: unknown command %q", args[0])
}

func runUsersImport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("users import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usersPath := fs.String("users", "", "users file to add to (created if missing)")
	dry := fs.Bool("dry-run", false, "check and print the result, write nothing")
	csvPath := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		csvPath, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if csvPath == "" || *usersPath == "" || fs.NArg() > 0 {
		fmt.Fprint(stderr, usersUsage)
		return errors.New("users import: want FILE.csv and --users PATH")
	}
	f, err := os.Open(csvPath)
	if err != nil {
		return fmt.Errorf("users import: %w", err)
	}
	defer f.Close()
	old, err := os.ReadFile(*usersPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("users import: %w", err)
	}
	out, n, err := auth.ImportCSV(csvPath, f, *usersPath, old)
	if err != nil {
		return err
	}
	if *dry {
		_, err := stdout.Write(out)
		return err
	}
	if err := auth.WriteUsersFile(*usersPath, out); err != nil {
		return fmt.Errorf("users import: %w", err)
	}
	fmt.Fprintf(stdout, "imported %d users into %s\n", n, *usersPath)
	return nil
}

// runUsersList prints the users serve would have with the same settings.
func runUsersList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c serveConfig
	st := serveSettings(&c)
	if err := st.Parse("users list", args, getenv, stderr); err != nil {
		return err
	}
	users, err := auth.NewUsers(nil)
	if err != nil {
		return err
	}
	if c.users != "" {
		if users, err = auth.LoadUsers(c.users); err != nil {
			return err
		}
	}
	svc := auth.NewService(users, auth.Config{})
	srcs, closeDirs, err := c.dir.sources()
	defer closeDirs()
	if err != nil {
		return err
	}
	var status []directory.Status
	if len(srcs) > 0 {
		set := directory.New(svc, users, srcs, directory.Config{TTL: c.dir.ttl})
		if err := set.Refresh(ctx); err != nil {
			fmt.Fprintln(stderr, "ctibridge: users list:", err)
		}
		status = set.Status()
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USERNAME\tNAME\tPROFILE\tSOURCE\tENDPOINTS\tGROUPS")
	for _, u := range svc.Users().All() {
		prof, src := u.Profile, u.Source
		if prof == "" {
			prof = u.Role.String()
		}
		if src == "" {
			src = "users file"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", u.Username, u.Name, prof, src, strings.Join(u.Endpoints, ","), strings.Join(u.Groups, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range status {
		if s.Err != nil {
			return fmt.Errorf("users list: directory %s: %w", s.Name, s.Err)
		}
	}
	return nil
}
