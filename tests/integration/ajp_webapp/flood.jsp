<%@ page trimDirectiveWhitespaces="true" %><%
  // ?mb= megabytes of hex text (1 MB repeated), written as fast as the connection takes them.
  response.setContentType("text/plain");
  int mb = Integer.parseInt(request.getParameter("mb"));
  java.util.Random random = new java.util.Random(11);
  byte[] text = new byte[1 << 20];
  for (int i = 0; i < text.length; ++i) text[i] = (byte) "0123456789abcdef".charAt(random.nextInt(16));
  java.io.OutputStream o = response.getOutputStream();
  for (int i = 0; i < mb; ++i) o.write(text);
%>
