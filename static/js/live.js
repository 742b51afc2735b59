// One websocket per run page: snapshot first, then ordered events; a gap asks for a resync, a dropped
// connection shows "reconnecting" and reconnects with backoff (the server sends a fresh snapshot).

export class LiveRun {
  constructor(url, state, { onConnection = () => {} } = {}) {
    this.url = url;
    this.state = state;
    this.onConnection = onConnection;
    this.retry = 0;
    this.closed = false;
    this.resyncTimer = null;
    this.connect();
    window.addEventListener("online", () => this.kick());
  }

  connect() {
    this.onConnection(this.retry ? "reconnecting" : "connecting");
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onmessage = (m) => this.onMessage(JSON.parse(m.data));
    ws.onclose = (e) => {
      if (this.ws !== ws || this.closed) return;
      if (e.code === 4403 || e.code === 4401 || e.code === 4404) {
        this.onConnection("refused");
        return;
      }
      this.onConnection("reconnecting");
      const backoff = Math.min(10000, 250 * 2 ** this.retry) * (0.75 + Math.random() / 2);
      const delay = Math.max(backoff, (this.holdUntil || 0) - Date.now());
      this.retry += 1;
      this.timer = setTimeout(() => this.connect(), delay);
    };
  }

  // Reconnect now (network came back, or a test asked).
  kick() {
    clearTimeout(this.timer);
    if (this.ws && this.ws.readyState <= 1) return;
    this.connect();
  }

  // Drop the connection as a lost network would, staying offline for at least holdMs (tests use it).
  drop(holdMs = 0) {
    this.holdUntil = Date.now() + holdMs;
    if (this.ws) this.ws.close();
  }

  send(obj) {
    if (this.ws && this.ws.readyState === 1) this.ws.send(JSON.stringify(obj));
  }

  onMessage(msg) {
    if (msg.type === "snapshot") {
      this.retry = 0;
      clearTimeout(this.resyncTimer);
      this.resyncTimer = null;
      this.state.applySnapshot(msg);
      this.onConnection("live");
      return;
    }
    if (msg.type === "error") {
      this.onConnection("error", msg);
      return;
    }
    const outcome = this.state.applyEvent(msg);
    if (outcome === "gap" && this.resyncTimer == null) {
      // Ask for the missing events; if they do not close the gap soon, ask for a whole snapshot.
      this.send({ type: "resync", after: this.state.seq });
      this.resyncTimer = setTimeout(() => this.send({ type: "snapshot" }), 3000);
    } else if (outcome === "applied" && this.resyncTimer != null) {
      clearTimeout(this.resyncTimer);
      this.resyncTimer = null;
    }
  }
}

export function socketUrl(path) {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${location.host}${path}`;
}
