// The floor under any router (the fleet suite's router overhead): a child
// process that pipes TCP bytes both ways to one address (argv[2]) without
// reading them.
// A gRPC client pointed at it reaches that replica through one more process
// and nothing else, so its added latency is what two more process wakeups
// per call cost on this machine. It cannot route; it is not the product.
// Reports its address over IPC.
import net from 'node:net';

const at = process.argv[2].lastIndexOf(':');
const [host, port] = [process.argv[2].slice(0, at), Number(process.argv[2].slice(at + 1))];
const server = net.createServer({ noDelay: true }, (client) => {
  const up = net.connect({ host, port, noDelay: true });
  client.pipe(up).pipe(client);
  const end = () => {
    client.destroy();
    up.destroy();
  };
  client.on('error', end);
  up.on('error', end);
  client.on('close', end);
  up.on('close', end);
});
server.listen(0, '127.0.0.1', () => process.send(`127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => process.exit(0));
