export { buildProxy, type Proxy, type ProxyDeps } from './proxy.js';
