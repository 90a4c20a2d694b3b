// A stand-in for k6's `k6/ws`: records each connection (URL and params),
// runs its callback with a socket that records handlers and timers, then
// delivers one `message.sent` frame written 5 ms earlier, as chatlab's
// /v1/ws would.
export default {
  connect(url, params, callback) {
    const socket = {
      handlers: {},
      timeouts: [],
      closed: false,
      on(event, handler) {
        this.handlers[event] = handler;
      },
      setTimeout(handler, ms) {
        this.timeouts.push(ms);
      },
      close() {
        this.closed = true;
      },
    };
    globalThis.__k6.sockets = globalThis.__k6.sockets || [];
    globalThis.__k6.sockets.push({ url, params, socket });
    callback(socket);
    const occurred = new Date(Date.now() - 5).toISOString();
    socket.handlers.message?.(
      JSON.stringify({ id: '0:1', type: 'message.sent', data: { type: 'message.sent', occurred_at: occurred } }),
    );
    socket.handlers.message?.(JSON.stringify({ id: '0:1', type: 'heartbeat', data: null }));
    return { status: 101 };
  },
};
