<%@ page trimDirectiveWhitespaces="true" %><%
  // Echoes the request body byte for byte (binary-safe: the output stream, not the JspWriter).
  response.setContentType("application/octet-stream");
  java.io.InputStream in = request.getInputStream();
  java.io.OutputStream o = response.getOutputStream();
  byte[] buffer = new byte[65536];
  long total = 0;
  for (int n; (n = in.read(buffer)) > 0; total += n) o.write(buffer, 0, n);
  o.flush();
%>