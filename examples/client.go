// client.go -- take a dlockd lock (waiting up to 10 s), renew it while
// working, release it. Go standard library only: go run client.go
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

func call(method, url string, body any) (int, map[string]any) {
	var buf bytes.Buffer
	if body != nil {
		json.NewEncoder(&buf).Encode(body)
	}
	req, _ := http.NewRequest(method, url, &buf)
	req.Header.Set("Content-Type", "application/json")
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func main() {
	url := os.Getenv("DLOCKD_URL")
	if url == "" {
		url = "http://127.0.0.1:8080"
	}
	lock := url + "/locks/nightly-report"
	owner := map[string]any{"owner": "report-go", "ttl_ms": 15000}

	status, grant := call("PUT", lock, map[string]any{"owner": "report-go", "ttl_ms": 15000, "wait_ms": 10000})
	if status != 200 {
		log.Fatalf("lock not acquired: %v", grant["message"])
	}
	fmt.Println("acquired with fencing token", grant["fencing_token"])
	for step := 1; step <= 3; step++ {
		fmt.Println("working, step", step)
		if status, out := call("POST", lock+"/heartbeat", owner); status != 200 {
			log.Fatalf("lease lost: %v", out["message"]) // 409 not_held: stop working
		}
	}
	_, released := call("DELETE", lock+"?owner=report-go", nil)
	fmt.Println("released:", released)
}
