package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// admin calls the fake API server's bench endpoints. They are plain HTTP next to the API, so
// they go through their own client: the informer's transport counts only the API's responses.
type admin struct {
	base   string
	client *http.Client
}

func newAdmin(host string) *admin {
	return &admin{
		base:   strings.TrimSuffix(host, "/"),
		client: &http.Client{Timeout: 60 * time.Second},
	}
}

// phaseStart is what update and relist answer.
type phaseStart struct {
	OK       bool   `json:"ok"`
	Sentinel string `json:"sentinel"`
	Updated  int    `json:"updated"`
	Deleted  int    `json:"deleted"`
}

type serverChecksum struct {
	Count    int    `json:"count"`
	Checksum string `json:"checksum"`
}

func (a *admin) call(method, path string, query url.Values, into any) error {
	target := a.base + path + "?" + query.Encode()
	request, err := http.NewRequest(method, target, nil)
	if err != nil {
		return err
	}
	response, err := a.client.Do(request)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, target, err)
	}
	if response.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, target, response.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%s %s: decoding %q: %w", method, target, body, err)
	}
	return nil
}

func (a *admin) startPhase(path string, query url.Values) phaseStart {
	var started phaseStart
	if err := a.call(http.MethodPost, path, query, &started); err != nil {
		fail("%v", err)
	}
	if !started.OK || started.Sentinel == "" {
		fail("POST %s answered %+v: not ok or no sentinel", path, started)
	}
	return started
}

func (a *admin) update(resource string, count, rate int) phaseStart {
	return a.startPhase("/admin/bench/update", url.Values{
		"resource": {resource},
		"count":    {fmt.Sprint(count)},
		"rate":     {fmt.Sprint(rate)},
	})
}

func (a *admin) relist(resource string, fraction float64) phaseStart {
	return a.startPhase("/admin/bench/relist", url.Values{
		"resource": {resource},
		"fraction": {fmt.Sprint(fraction)},
	})
}

func (a *admin) checksum(resource string) serverChecksum {
	var answer serverChecksum
	if err := a.call(http.MethodGet, "/admin/bench/checksum", url.Values{"resource": {resource}}, &answer); err != nil {
		fail("%v", err)
	}
	return answer
}

// contentTypeCounter counts the Content-Type of every response the API client receives.
type contentTypeCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *contentTypeCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(request *http.Request) (*http.Response, error) {
		response, err := next.RoundTrip(request)
		if err == nil {
			c.mu.Lock()
			c.counts[response.Header.Get("Content-Type")]++
			c.mu.Unlock()
		}
		return response, err
	})
}

func (c *contentTypeCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(request *http.Request) (*http.Response, error) {
	return f(request)
}
