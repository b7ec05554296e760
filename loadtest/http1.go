package loadtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// readResponse reads one HTTP/1.x response from br and discards its body.
// It allocates nothing: the status line and headers are read as slices of
// br's buffer. closeAfter is set when the server will close the
// connection after this response (Connection: close, or a body delimited
// by the end of the connection, which it then reads).
func readResponse(br *bufio.Reader) (status int, closeAfter bool, err error) {
	for {
		status, closeAfter, err = readOne(br)
		// 1xx (100 Continue, 103 Early Hints) come before the response.
		if err != nil || status >= 200 || status == 101 {
			return status, closeAfter, err
		}
	}
}

var (
	hContentLength    = []byte("content-length")
	hTransferEncoding = []byte("transfer-encoding")
	hConnection       = []byte("connection")
)

func badResponse(format string, args ...any) error {
	return kindError{ErrBadResponse, "loadtest: bad response: " + fmt.Sprintf(format, args...)}
}

func readOne(br *bufio.Reader) (status int, closeAfter bool, err error) {
	line, err := readLine(br)
	if err != nil {
		return 0, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, badResponse("status line %q", trunc(line))
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, false, badResponse("status line %q", trunc(line))
		}
		status = status*10 + int(c-'0')
	}
	http10 := line[7] == '0'
	closeAfter = http10
	length, chunked := int64(-1), false
	for {
		line, err = readLine(br)
		if err != nil {
			return status, false, err
		}
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return status, false, badResponse("header line %q", trunc(line))
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, hContentLength):
			n, perr := strconv.ParseInt(string(v), 10, 64) // no allocation: the compiler elides the copy
			if perr != nil || n < 0 {
				return status, false, badResponse("Content-Length %q", trunc(v))
			}
			length = n
		case bytes.EqualFold(k, hTransferEncoding):
			chunked = bytes.Contains(bytes.ToLower(v), []byte("chunked"))
		case bytes.EqualFold(k, hConnection):
			if bytes.EqualFold(v, []byte("close")) {
				closeAfter = true
			} else if bytes.EqualFold(v, []byte("keep-alive")) {
				closeAfter = false
			}
		}
	}
	switch {
	case status < 200 || status == 204 || status == 304:
		return status, closeAfter, nil
	case chunked:
		return status, closeAfter, readChunked(br)
	case length >= 0:
		_, err = br.Discard(int(length))
		return status, closeAfter, err
	}
	// No length: the body runs to the end of the connection.
	_, err = io.Copy(io.Discard, br)
	return status, true, err
}

// readLine returns one line without its CRLF (or LF).
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, badResponse("line longer than %d bytes", br.Size())
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, nil
}

func readChunked(br *bufio.Reader) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || n < 0 {
			return badResponse("chunk size %q", trunc(line))
		}
		if n == 0 {
			// Trailers, then an empty line.
			for {
				line, err := readLine(br)
				if err != nil {
					return err
				}
				if len(line) == 0 {
					return nil
				}
			}
		}
		if _, err := br.Discard(int(n)); err != nil {
			return err
		}
		if _, err := readLine(br); err != nil {
			return err
		}
	}
}

func trunc(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}
