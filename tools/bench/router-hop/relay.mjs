// A raw gRPC relay for the router-hop experiment (not the product): a
// node:http2 server whose every stream is piped, bytes unread, to one
// upstream HTTP/2 session to the address in argv[2]. Headers, data and
// trailers pass through; nothing is decoded. Reports its address over IPC.
import http2 from 'node:http2';

const withoutPseudo = (h) => Object.fromEntries(Object.entries(h).filter(([k]) => !k.startsWith(':')));
const upstream = http2.connect(`http://${process.argv[2]}`);
const server = http2.createServer();
server.on('stream', (stream, headers) => {
  const up = upstream.request({ ...withoutPseudo(headers), ':method': 'POST', ':path': headers[':path'] });
  stream.on('data', (d) => up.write(d));
  stream.on('end', () => up.end());
  let responded = false;
  const respond = () => {
    if (!responded) stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    responded = true;
  };
  up.on('data', (d) => {
    respond();
    stream.write(d);
  });
  up.on('trailers', (t) => {
    if (!responded) {
      // A trailers-only answer (an error): one HEADERS frame that ends the stream.
      responded = true;
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...withoutPseudo(t) }, { endStream: true });
      return;
    }
    stream.once('wantTrailers', () => stream.sendTrailers(withoutPseudo(t)));
    stream.end();
  });
  stream.on('close', () => {
    if (!up.closed) up.close();
  });
});
server.listen(0, '127.0.0.1', () => process.send(`127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => process.exit(0));
