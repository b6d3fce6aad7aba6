<%@ page contentType="text/plain; charset=UTF-8" trimDirectiveWhitespaces="true" %>
<%
  // What the servlet sees of the request, one "name=value" line each, for test_ajp.py.
  out.println("method=" + request.getMethod());
  out.println("uri=" + request.getRequestURI());
  out.println("query=" + request.getQueryString());
  out.println("remote_addr=" + request.getRemoteAddr());
  out.println("remote_port=" + request.getRemotePort());
  out.println("remote_user=" + request.getRemoteUser());
  out.println("auth_type=" + request.getAuthType());
  out.println("secure=" + request.isSecure());
  out.println("scheme=" + request.getScheme());
  out.println("server_name=" + request.getServerName());
  out.println("server_port=" + request.getServerPort());
  out.println("protocol=" + request.getProtocol());
  out.println("content_length=" + request.getContentLengthLong());
  // The TLS facts Tomcat makes of AJP's SSL attributes (read by name: they are not all listed).
  out.println("tls.cipher_suite=" + request.getAttribute("jakarta.servlet.request.cipher_suite"));
  out.println("tls.key_size=" + request.getAttribute("jakarta.servlet.request.key_size"));
  out.println("tls.session_id=" + request.getAttribute("jakarta.servlet.request.ssl_session_id"));
  out.println("tls.protocol=" + request.getAttribute("org.apache.tomcat.util.net.secure_protocol_version"));
  Object certificates = request.getAttribute("jakarta.servlet.request.X509Certificate");
  out.println("tls.client_certificates=" +
      (certificates == null ? "null" : String.valueOf(((Object[]) certificates).length)));
  out.println("tls.client_subject=" + (certificates == null ? "null" :
      ((java.security.cert.X509Certificate) ((Object[]) certificates)[0]).getSubjectX500Principal().getName()));
  java.util.Enumeration<String> names = request.getHeaderNames();
  while (names.hasMoreElements()) {
    String name = names.nextElement();
    java.util.Enumeration<String> values = request.getHeaders(name);
    while (values.hasMoreElements()) out.println("header." + name.toLowerCase() + "=" + values.nextElement());
  }
  java.util.Enumeration<String> attributes = request.getAttributeNames();
  while (attributes.hasMoreElements()) {
    String name = attributes.nextElement();
    out.println("attribute." + name + "=" + request.getAttribute(name));
  }
%>
