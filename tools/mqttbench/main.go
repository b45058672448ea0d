// mqttbench: MQTT publishers and subscribers at full speed on one topic, for `mqbench crosscheck`'s MQTT
// reference at its best (harness/crosscheck/tools/mqtt.py). Mosquitto ships no benchmark, and its command-line
// clients print every message, so their figure is a floor; this client (Eclipse Paho for Go) prints counts.
//
// Subscribers connect and subscribe first; then every publisher publishes `size`-byte messages at the given
// QoS as fast as the broker takes them for `seconds`, keeping at most `window` publishes unconfirmed (QoS 0: not
// yet written to the socket; QoS 1 and 2: not yet acknowledged). Output, one line each:
//
//	sub I T N    every 50 ms per subscriber: wall-clock seconds since the epoch, messages received so far
//	pub I N S    at the end per publisher: messages published and confirmed, over S seconds
//
// The subscribers stop `grace` seconds after the last publisher. Exit status 1 with one line on stderr when
// a client cannot connect or subscribe.
package main

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mqttbench: "+format+"\n", args...)
	os.Exit(1)
}

func connect(broker, id string) mqtt.Client {
	opts := mqtt.NewClientOptions().AddBroker(broker).SetClientID(id).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectRetry(false).SetKeepAlive(30 * time.Second).
		SetConnectTimeout(10 * time.Second).SetMaxResumePubInFlight(0)
	client := mqtt.NewClient(opts)
	if t := client.Connect(); !t.WaitTimeout(15*time.Second) || t.Error() != nil {
		fail("%s could not connect to %s: %v", id, broker, t.Error())
	}
	return client
}

func main() {
	broker := flag.String("broker", "tcp://127.0.0.1:1883", "broker URL")
	topic := flag.String("topic", "mqttbench", "topic")
	qos := flag.Int("qos", 0, "QoS of publishes and subscriptions (0, 1 or 2)")
	size := flag.Int("size", 100, "payload bytes")
	pubs := flag.Int("pubs", 1, "publishers")
	subs := flag.Int("subs", 1, "subscribers")
	seconds := flag.Float64("seconds", 12, "how long the publishers publish")
	window := flag.Int("window", 1000, "publishes in flight unconfirmed, per publisher")
	grace := flag.Float64("grace", 2, "seconds the subscribers stay after the publishers end")
	flag.Parse()
	if *qos < 0 || *qos > 2 || *size < 1 || *pubs < 1 || *subs < 0 || *window < 1 {
		fail("bad arguments: qos 0-2, size >= 1, pubs >= 1, subs >= 0, window >= 1")
	}
	tag := fmt.Sprintf("%d", os.Getpid())

	counts := make([]atomic.Int64, *subs)
	subscribers := make([]mqtt.Client, *subs)
	for i := range subscribers {
		i := i
		subscribers[i] = connect(*broker, fmt.Sprintf("mqttbench-sub-%s-%d", tag, i))
		t := subscribers[i].Subscribe(*topic, byte(*qos), func(mqtt.Client, mqtt.Message) { counts[i].Add(1) })
		if !t.WaitTimeout(15*time.Second) || t.Error() != nil {
			fail("subscriber %d could not subscribe to %s: %v", i, *topic, t.Error())
		}
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // one sampler for all subscribers: lines are written by one goroutine only
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				stamp := float64(now.UnixNano()) / 1e9
				for i := range counts {
					fmt.Printf("sub %d %.6f %d\n", i, stamp, counts[i].Load())
				}
			}
		}
	}()

	payload := make([]byte, *size)
	for i := range payload {
		payload[i] = 'x'
	}
	publishers := make([]mqtt.Client, *pubs)
	for i := range publishers {
		publishers[i] = connect(*broker, fmt.Sprintf("mqttbench-pub-%s-%d", tag, i))
	}
	sent := make([]int64, *pubs)
	took := make([]float64, *pubs)
	var wg sync.WaitGroup
	for i, client := range publishers {
		wg.Add(1)
		go func(i int, client mqtt.Client) {
			defer wg.Done()
			inflight := make([]mqtt.Token, *window)
			began := time.Now()
			deadline := began.Add(time.Duration(*seconds * float64(time.Second)))
			n := int64(0)
			for time.Now().Before(deadline) {
				for k := 0; k < 100; k++ { // the clock read once per 100 publishes
					slot := n % int64(*window)
					if t := inflight[slot]; t != nil {
						t.Wait()
						if t.Error() != nil {
							fail("publisher %d: %v", i, t.Error())
						}
					}
					inflight[slot] = client.Publish(*topic, byte(*qos), false, payload)
					n++
				}
			}
			for _, t := range inflight {
				if t != nil {
					t.Wait()
				}
			}
			sent[i], took[i] = n, time.Since(began).Seconds()
		}(i, client)
	}
	wg.Wait()
	time.Sleep(time.Duration(*grace * float64(time.Second)))
	close(stop)
	<-sampled
	for i := range sent {
		fmt.Printf("pub %d %d %.6f\n", i, sent[i], took[i])
	}
	for _, c := range publishers {
		c.Disconnect(100)
	}
	for _, c := range subscribers {
		c.Disconnect(100)
	}
}
